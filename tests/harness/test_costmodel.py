"""The cost model: kernel time per context switch fitted over the ports of one run, user-space work scaled by the
CPU's speed; its error is reported, never tuned away."""
import pytest

from harness import costmodel


def _record(port, user, system, vol, invol):
    step = {"phase": "common", "passed": True, "app_user_us_per_request": user, "app_system_us_per_request": system,
            "kernel": {"app_ctx_voluntary_per_request": vol, "app_ctx_involuntary_per_request": invol}}
    return {"port": port, "steps": [step, {**step, "phase": "mst"}]}


CAL = {"cpu_single_thread_events_per_s": {"median": 1300.0}, "wakeup_cross_cpu_us": {"median": 10.0}}


def test_kernel_time_per_switch_is_fitted_and_the_fit_reports_its_own_error():
    by = {"a": [_record("a", 80, 40, 1.5, 0.5)], "b": [_record("b", 250, 80, 3.0, 1.0)]}
    found = costmodel.costs(by)
    assert [c.port for c in found] == ["a", "b"] and found[0].switches == 2.0 and found[1].total_us == 330
    k = costmodel.fit(found, 10.0)
    assert k == pytest.approx(2.0)                      # 40 = 2 x 2 x 10 and 80 = 2 x 4 x 10: an exact fit
    assert costmodel.relative_errors(found, k, 10.0) == {"a": pytest.approx(0.0), "b": pytest.approx(0.0)}
    # another machine: twice the CPU speed, wake-ups a fifth of the cost
    there = {"cpu_single_thread_events_per_s": {"median": 2600.0}, "wakeup_cross_cpu_us": {"median": 2.0}}
    assert costmodel.predict(found[1], k, CAL, there) == pytest.approx(125 + 2.0 * 4 * 2.0)


def test_the_report_says_whether_the_ranking_depends_on_the_kernels_costs():
    same = {"a": [_record("a", 80, 40, 1.5, 0.5)], "b": [_record("b", 250, 80, 3.0, 1.0)]}
    text = " ".join(costmodel.report(same, CAL))
    assert "a < b; by median user-space work alone" in text and "the same order" in text
    assert "none exists yet" in text
    # b costs less in user space but switches far more: the kernel decides the order
    flipped = {"a": [_record("a", 100, 20, 1.0, 0.0)], "b": [_record("b", 90, 60, 3.0, 0.0)]}
    text = " ".join(costmodel.report(flipped, CAL))
    assert "b < a (a different order" in text
    assert costmodel.report({"a": same["a"]}, CAL) == [] and costmodel.report(same, None) == []


def test_a_readers_run_is_set_beside_the_published_one_scaled_by_the_two_calibrations():
    published = {"a": [_record("a", 80, 40, 1.5, 0.5)], "b": [_record("b", 250, 80, 3.0, 1.0)]}
    theirs = {"cpu_single_thread_events_per_s": {"median": 2600.0}, "wakeup_cross_cpu_us": {"median": 2.0}}
    yours = {"b": [_record("b", 130, 20, 3.0, 1.0)]}
    lines = costmodel.transfer(published, CAL, yours, theirs)
    assert "| b | 141 | 150 | -6% |" in lines                  # 125 + 2 x 4 x 2 predicted; 150 measured
    assert costmodel.transfer(published, CAL, yours, None) == []
