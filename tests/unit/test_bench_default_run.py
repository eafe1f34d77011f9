"""bench.default_run names the tests a run failed: a consecutive-runs figure (issue 39)
is only as good as its account of what failed."""

from bench.default_run import failed_tests

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="4">
<testcase classname="suites.test_reclaim" name="test_retain_keeps_the_pv" time="1.0"/>
<testcase classname="suites.test_binding_modes" name="test_pinned" time="2.0"><failure message="x">boom</failure></testcase>
<testcase classname="suites.test_zone_outage" name="test_outage" time="3.0"><error message="y">setup</error></testcase>
<testcase classname="suites.test_snapshots" name="test_restore" time="0.1"><skipped message="kind only"/></testcase>
</testsuite></testsuites>"""


def test_failed_and_errored_cases_are_named_and_passed_or_skipped_ones_are_not() -> None:
    assert failed_tests(JUNIT) == ["suites.test_binding_modes::test_pinned: x", "suites.test_zone_outage::test_outage: y"]


def test_a_failure_without_a_message_attribute_is_named_by_its_text_first_line() -> None:
    junit = ('<testsuites><testsuite><testcase classname="a" name="b"><failure>AssertionError: gone\nmore'
             '</failure></testcase></testsuite></testsuites>')
    assert failed_tests(junit) == ["a::b: AssertionError: gone"]


def test_a_clean_report_names_nothing() -> None:
    assert failed_tests('<testsuites><testsuite><testcase classname="a" name="b"/></testsuite></testsuites>') == []
