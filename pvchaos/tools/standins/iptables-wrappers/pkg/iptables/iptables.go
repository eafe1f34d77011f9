// Package iptables is pvchaos's stand-in for sigs.k8s.io/iptables-wrappers/pkg/iptables,
// which the Go module proxy does not serve: the names the kubelet uses, and no iptables
// found, so the kubelet skips its iptables chains as on an nftables-only host.
package iptables

import (
	"context"
	"time"
)

// Chain is an iptables chain name.
type Chain string

// Table is an iptables table name.
type Table string

// RulePosition is where EnsureRule puts a rule.
type RulePosition string

// Protocol is the IP family a client manages.
type Protocol string

// Mode says which iptables binaries to use.
type Mode string

const (
	TableFilter Table = "filter"
	TableNAT    Table = "nat"
	TableMangle Table = "mangle"

	ChainInput  Chain = "INPUT"
	ChainOutput Chain = "OUTPUT"

	Prepend RulePosition = "-I"
	Append  RulePosition = "-A"

	ProtocolIPv4 Protocol = "IPv4"
	ProtocolIPv6 Protocol = "IPv6"

	// UseInstalledMode asks for whichever iptables the host has installed.
	UseInstalledMode Mode = "installed"
)

// Interface is what the kubelet calls on an iptables client.
type Interface interface {
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	IsIPv6() bool
	Protocol() Protocol
	Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration)
}

// NewBestEffort returns a client per IP family that works on this host: none here.
func NewBestEffort(_ context.Context, _ Mode) map[Protocol]Interface {
	return nil
}
