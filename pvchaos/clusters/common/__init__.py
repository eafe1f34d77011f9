"""What several backends share (STYLE 13, kind's `providers/common/`): feature gates,
host processes, the state root, the harness's provisioner names. The backends
(`clusters.local`, `clusters.kind`, `clusters.existing`) import from here and never from
each other (the import-linter contract "the three backends are independent")."""
