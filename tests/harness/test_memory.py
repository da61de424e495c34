"""memory: GC log parsing, the JVM options, the headline's logic, the cgroup itself, and one QUICK run of a real
port in two memory limits."""
import copy
import dataclasses
import json
import os
import subprocess
import sys
import time
import types

import pytest

from harness import cgroup, driver, settings as settings_mod
from harness.errors import Fatal
from harness.method import plan as plan_mod, runset, schema
from harness.method.memory import fatal_to_jvm
from harness.method.rule import Rule
from harness.paths import ROOT
from harness.ports import PORTS
from harness.report.sections import memory as memory_report
from harness.scenarios import memory
from harness.target import AppExited, Target

GC_LOG = """\
[0.012s] Using G1
[0.013s] Heap Min Capacity: 8M
[0.013s] Heap Initial Capacity: 8M
[0.013s] Heap Max Capacity: 96M
[1.500s] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 23M->5M(32M) 4.000ms
[2.500s] GC(1) Pause Young (Normal) (G1 Evacuation Pause) 23M->5M(32M) 6.500ms
[2.600s] GC(2) Pause Remark 20M->20M(32M) 1.250ms
[3.500s] GC(3) Concurrent Mark Cycle 12.000ms
[9.000s] GC(4) Pause Full (G1 Compaction Pause) 31M->30M(32M) 120.000ms
"""


def test_gc_pauses_are_the_stop_the_world_ones_with_their_uptime():
    pauses = memory.gc_pauses(GC_LOG)
    assert pauses == [(1.5, 4.0), (2.5, 6.5), (2.6, 1.25), (9.0, 120.0)]    # the concurrent cycle is not a pause
    w = memory.gc_window(pauses, 1.0, 3.0)
    assert w == {"gc_pause_share": round(11.75 / 1000 / 2.0, 4), "gc_pauses": 3, "gc_pause_max_ms": 6.5}
    assert memory.gc_window(pauses, 4.0, 5.0) == {"gc_pause_share": 0.0, "gc_pauses": 0, "gc_pause_max_ms": 0.0}
    assert memory.heap_max_mb(GC_LOG) == 96.0 and memory.heap_max_mb("[0.1s] Heap Max Capacity: 1G") == 1024.0


def test_the_fixed_heap_gives_way_to_a_share_of_the_limit(tmp_path):
    options = memory.jvm_options(["-Xms512m", "-Xmx512m", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError"], 75,
                                 tmp_path / "gc.log")
    assert options[:2] == ("-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError")
    assert "-XX:MaxRAMPercentage=75" in options and "-XX:MinRAMPercentage=75" in options and not any(o.startswith(("-Xms", "-Xmx")) for o in options)
    assert options[-1] == f"-Xlog:gc,gc+init:file={tmp_path / 'gc.log'}:uptime"


def _plan(**changes) -> memory.Plan:
    """bench.toml [memory] with `changes`."""
    return dataclasses.replace(plan_mod.section(settings_mod.load(env={}), "memory", memory.Plan), **changes)


def _steps(*steps, **cell) -> dict:
    """A record whose one cell holds `steps` (and the cell's other fields)."""
    return {"cells": [{"steps": list(steps), **cell}]}


def test_the_headline_is_the_smallest_limit_passing_everywhere_above_it_too():
    ok = _steps({"phase": "common", "passed": True})
    bad = _steps({"phase": "common", "passed": False})
    dead = {"cells": [], "start_failure": "exited at start"}
    assert memory_report.descent({1024: [ok, ok], 512: [ok, ok], 256: [ok, bad], 128: [dead]})[0] == 512
    assert memory_report.descent({1024: [ok], 512: [bad], 256: [ok]})[0] == 1024      # a pass below a fail is luck
    assert memory_report.descent({1024: [bad], 512: [ok]})[0] is None


def test_the_plan_sorts_limits_largest_first_and_refuses_tiny_ones():
    plan = _plan(iterations=3, limits_mb=[128, 1024, 256])
    assert memory.checked(plan).limits_mb == [1024, 256, 128]
    with pytest.raises(Fatal, match="limits_mb"):
        memory.checked(_plan(iterations=3, limits_mb=[16]))


def test_a_process_in_the_group_sees_the_limit_and_the_group_is_removed():
    with cgroup.MemoryLimit("bench-test-probe", 64) as group:
        out = subprocess.run([*group.prefix, "sh", "-c", "cat /proc/self/cgroup"], capture_output=True, text=True,
                             check=True).stdout
        assert "bench-test-probe" in out
        path = group.path
        assert group.oom_kills() == 0
    assert not path.exists()


def test_a_process_over_the_limit_is_killed_and_counted():
    with cgroup.MemoryLimit("bench-test-oom", 32) as group:
        # python allocating 200 MiB inside a 32-MiB group: the kernel's OOM killer ends it
        run = subprocess.run([*group.prefix, sys.executable, "-c", "x = bytearray(200 * 2**20); x[::4096] = b'1' * len(x[::4096])"],
                             capture_output=True, text=True)
        assert run.returncode == -9
        time.sleep(0.1)
        assert group.oom_kills() >= 1 and group.peak_mb() <= 32.5


def test_quick_memory_run_on_a_real_port_in_two_limits(tmp_path):
    """QUICK=1 `harness bench quarkus-vertx memory`: a fresh JVM per limit, its heap sized from the cgroup, the
    common step, the search and the idle connections measured, the GC's pauses read from its log."""
    env = dict(os.environ, QUICK="1", BENCH_RESULTS=str(tmp_path))
    run = subprocess.run([sys.executable, "-m", "harness", "bench", "quarkus-vertx", "memory"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    records = {json.loads(p.read_text())["jvm"]["limit_mb"]: json.loads(p.read_text())
               for p in tmp_path.glob("memory/*/quarkus-vertx-*mb-1.json")}
    assert set(records) == {512, 128}
    for limit, r in records.items():
        # every JVM's end is its record's result (none left partial, none skipped)
        assert r["status"] in ("complete", "died", "not-started") and r["oom_kills"] is not None, limit
        assert "-XX:MaxRAMPercentage=75" in r["jvm_options"], limit
        if r["started"] and not r["died"]:
            # the JVM sized its heap from the cgroup: 75 % of the limit, not the fixed 512 MiB
            assert r["heap_max_mb"] is not None and r["heap_max_mb"] <= 0.76 * limit, (limit, r["heap_max_mb"])
            [one] = r["cells"]
            phases = [s["phase"] for s in one["steps"]]
            assert "common" in phases and "idle" in phases and one["mst"]["probes"], phases
            assert all("gc_pause_share" in s for s in one["steps"]), limit
            assert one["idle"]["opened"] == 500, limit
    assert "## Memory-limited containers" in (tmp_path / "RESULTS.md").read_text()
    assert not list((cgroup.ROOT / "memory").glob("bench-quarkus-vertx*")) and not list(cgroup.ROOT.glob("bench-*"))


def test_a_step_on_an_app_that_died_says_so_with_its_logs_last_line(tmp_path):
    """A port that dies mid-run (an OutOfMemoryError under overload) is a result of its own (AppExited, the log's
    last line), not a generator error that ends the whole run."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    log = tmp_path / "app.log"
    log.write_text("started\nTerminating due to java.lang.OutOfMemoryError: Java heap space\n\n")

    class NoServer:
        def run_rate(self, *args, **kwargs):
            raise Fatal("openloop failed: cannot connect to http://127.0.0.1:1/")

    settings = settings_mod.load()
    target = Target("http://127.0.0.1:1/", dead.pid, None, NoServer(), None, settings, Rule.from_settings(settings),
                    log=log)
    with pytest.raises(AppExited, match="exited during a warmup step: Terminating due to java.lang.OutOfMemoryError"):
        target.rate(100, 1, "warmup")
    assert target.drain(max_seconds=5) < 1          # nothing to wait for: the app is gone


def test_below_a_limit_the_jvm_did_not_live_in_the_iteration_runs_nothing(monkeypatch):
    """Largest first: once a cell did not start, or died before it served the common rate, that iteration's smaller
    limits are recorded as not run; a cell that only failed the rule, or died after serving it, does not stop it."""
    served = _steps({"phase": "common", "passed": True})
    outcomes = {("a", 512): {**served, "died": "exit 137 in the idle step"}, ("a", 256): _steps({"phase": "common",
                "passed": False}), ("a", 128): {}, ("b", 512): {}, ("b", 256): {"oom_kills": 1}, ("b", 128): {"x": 1}}
    ran, skipped = [], []
    monkeypatch.setattr(driver, "run_jvm", lambda ctx, scenario, plan, port, it, coords, mst: ran.append(
        (port.name, coords["limit_mb"])) or {**outcomes[(port.name, coords["limit_mb"])], "jvm": coords})
    monkeypatch.setattr(driver, "skip_jvm", lambda ctx, scenario, plan, port, it, coords, reason: skipped.append(
        (port.name, coords["limit_mb"], reason)) or {"jvm": coords, "skipped": reason})
    monkeypatch.setattr(driver, "baseline_msts", lambda results: {})
    monkeypatch.setattr(memory, "baseline_msts", lambda results: {})
    plan = _plan(iterations=1, limits_mb=[512, 256, 128])
    ctx = types.SimpleNamespace(plan=lambda cls: plan, settings={"load": {"target_host": "127.0.0.1"}}, results=None,
                                scenario="memory")
    memory.run(ctx, [types.SimpleNamespace(name="a"), types.SimpleNamespace(name="b")])
    assert sorted(ran) == [("a", 128), ("a", 256), ("a", 512), ("b", 256), ("b", 512)]
    assert skipped == [("b", 128, "not run: the JVM did not start or died before passing the common rate at 256 MiB")]
    assert fatal_to_jvm({"died": "exit 3"}) and fatal_to_jvm({"start_failure": "x"})
    assert not fatal_to_jvm({"oom_kills": 0, "died": None})
    assert not fatal_to_jvm({**served, "oom_kills": 1}) and fatal_to_jvm({"cells": [], "oom_kills": 1})


def test_the_common_rate_comes_from_the_lowest_baseline_mst_capped_by_the_setting(monkeypatch):
    """Below every port's MST on this machine, whatever machine the setting was chosen on (session.choose_rate)."""
    seen = []
    monkeypatch.setattr(driver, "run", lambda ctx, scenario, plan, selected: seen.append((plan.rate, scenario.rate_basis)))
    ctx = types.SimpleNamespace(plan=lambda cls: _plan(), settings={"load": {"target_host": "127.0.0.1"}}, results=None,
                                scenario="memory")
    monkeypatch.setattr(memory, "baseline_msts", lambda results: {"a": 2500, "b": 4600})
    memory.run(ctx, [])
    monkeypatch.setattr(memory, "baseline_msts", lambda results: {"a": 9000})
    memory.run(ctx, [])
    assert seen[0] == (1500, "60% of the lowest baseline MST (a: 2,500/s)")
    assert seen[1][0] == _plan().rate and seen[1][1].startswith("the fixed cap")


NMT = """Native Memory Tracking:

Total: reserved=1815215KB, committed=183023KB
       malloc: 23087KB #128392

-                 Java Heap (reserved=393216KB, committed=102400KB)
                            (mmap: reserved=393216KB, committed=102400KB)

-                     Class (reserved=1048903KB, committed=12047KB)
                            (classes #16387)

-                    Thread (reserved=46283KB, committed=4003KB)
                            (threads #45)
                            (stack: reserved=46080KB, committed=3800KB)

-                 Metaspace (reserved=65815KB, committed=62615KB)
"""


def test_the_native_memory_summary_gives_committed_mib_per_category_and_the_thread_count():
    account = memory.nmt_summary(NMT)
    assert account == {"Total": 178.7, "Java Heap": 100.0, "Class": 11.8, "Thread": 3.9, "threads": 45,
                       "Metaspace": 61.1}
    assert memory.nmt_summary("12345:\nNative memory tracking is not enabled") == {}


def test_a_failure_before_the_warm_up_settled_leaves_the_limit_undetermined_not_failed():
    ok = {**_steps({"phase": "common", "passed": True}), "warmup": {"settled": False}}
    cold = {**_steps({"phase": "common", "passed": False}), "warmup": {"settled": False}}
    warm_fail = {**_steps({"phase": "common", "passed": False}), "warmup": {"settled": True}}
    killed = {**_steps(), "oom_kills": 1, "warmup": {"settled": False}}
    outcomes = [memory_report.common_outcome(r) for r in (ok, cold, warm_fail, killed)]
    assert outcomes == ["pass", "unsettled", "fail", "fail"]
    assert memory_report.descent({512: [ok, ok], 256: [ok, cold], 128: [killed]}) == (512, 256)
    assert memory_report.descent({512: [ok], 256: [cold, warm_fail]}) == (512, None)       # one settled failure decides
    assert memory_report.descent({512: [cold]}) == (None, 512)
    assert memory_report.descent({512: [ok], 256: [ok]}) == (256, None)


def test_how_a_cell_ended_its_idle_connections_step():
    """Held or failed (the step's record), OOM-killed or died in it (the JVM exited during the idle step), or never
    reached (it died before, in the MST search)."""
    idle_failed = _steps({"phase": "idle", "passed": False, "failure": "rate not reached"}, idle={"passed": False})
    killed = {**_steps(idle=None), "died": "the app exited during a idle step: atures: [agroal, cdi]", "oom_kills": 1}
    died = {**killed, "oom_kills": 0}
    before = {**_steps(idle=None), "died": "the app exited during a mst step: x", "oom_kills": 1}
    held = _steps(idle={"passed": True})
    assert [memory_report.idle_outcome(r) for r in (held, idle_failed, killed, died, before)] == \
        ["held", "failed", "OOM-killed", "died", None]
    assert memory_report.idle_failures([held, held]) is None
    assert memory_report.idle_failures([killed, idle_failed, held], " there") == \
        ("OOM-killed there in 1 of 3, failed the rule there in 1 of 3", "rate not reached")
    assert memory_report.idle_failures([before, held]) == ("did not reach it in 1 of 2", "")


def test_the_outcome_names_the_step_a_jvm_died_in():
    """Four ports died at 256 MiB in the warm-up's closed loop, before the common rate was offered; the
    table says where each JVM died (target.AppExited's message), not only that it did."""
    warm = {"died": "the app exited during a warmup-closed step: x", "oom_kills": 1}
    idle = {"died": "the app exited during a idle step: x", "oom_kills": 1}
    assert memory_report._outcome([warm, warm, idle]) == \
        "died 3/3 (2 in the closed-loop warm-up, 1 in the idle step); OOM-killed 3/3"
    assert memory_report._outcome([{"died": "Terminating due to java.lang.OutOfMemoryError"}]) == "died 1/1"
    assert memory_report._outcome([{"status": "complete"}]) == "ran"
    # the verdict's "one limit lower": the next limit down at which a JVM ran, not one whose runs were all skipped
    assert memory_report.limit_below({512: [{}], 256: [warm], 128: [{"skipped": "x"}]}, 512) == 256
    assert memory_report.limit_below({512: [{}], 256: [warm], 128: [{"skipped": "x"}]}, 256) is None


def published() -> list[dict]:
    """The published run's records, read in the one schema."""
    return [r for p in sorted((ROOT / "results" / "memory" / "20261124T200327Z").glob("*.json"))
            for r in schema.normalize(json.loads(p.read_text()))]


def test_the_smallest_passing_limit_says_what_the_same_limit_did_with_the_idle_connections(tmp_path):
    """The published run: quarkus-virtual passed 2,500 req/s at 256 MiB in 3 of 3, then was OOM-killed in the idle
    step in 3 of 3; quarkus-reactive and quarkus-vertx held the idle connections there; spring-virtual's 512 MiB
    failed the idle step in 2 of 3 (rate not reached). The criterion is the row's; the rest is the verdict's and the
    table's."""
    records = published()
    section = memory_report.render(runset.select(records, "memory", list(PORTS)), tmp_path)
    [decision] = section.decisions
    # the row names the ports and the limit, and what that limit did with the idle connections where a port it
    # names failed them there; the verdict says it beside each limit and the table's idle column per cell
    assert decision.choice == ("quarkus-virtual, quarkus-reactive, quarkus-vertx at 256 MiB (quarkus-virtual "
                               "OOM-killed there in 3 of 3 with 10,000 idle connections); not determined: "
                               "spring-platform, spring-webflux")
    assert decision.settings == "-XX:MaxRAMPercentage=75 (as run; no other fraction measured)"
    [headline] = [v for v in section.verdict if v.startswith("Under a container's memory limit")]
    assert headline == ("Under a container's memory limit, the smallest limit passing 2,500 req/s in every run was "
                        "256 MiB for quarkus-virtual (OOM-killed there in 3 of 3 with 10,000 idle connections); 256 MiB "
                        "for quarkus-reactive; 256 MiB for quarkus-vertx; 512 MiB for spring-virtual (failed the rule "
                        "there in 2 of 3 with 10,000 idle connections: rate not reached).")
    rows = [line for line in section.body if line.startswith("| quarkus-virtual | 256 |")]
    assert rows[0].endswith("| held 0/3; OOM-killed in it 3/3 |")          # the table's idle column, the same reading
    # quarkus-reactive and quarkus-vertx held them in every run at 256 MiB: no clause in the verdict, the table says it
    assert [line for line in section.body if line.startswith("| quarkus-reactive | 256 |")][0].endswith("| held 3/3 |")
    assert [line for line in section.body if line.startswith("| quarkus-vertx | 256 |")][0].endswith("| held 3/3 |")
    assert [line for line in section.body if line.startswith("| spring-virtual | 512 |")][0].endswith("| held 1/3 |")


def _published_section(tmp_path, change=None):
    records = published()
    if change:
        records = copy.deepcopy(records)
        for r in records:
            change(r)
    return memory_report.render(runset.select(records, "memory", list(PORTS)), tmp_path)


def test_the_section_says_the_memory_search_is_short_and_how_far_its_limit_may_lie(tmp_path):
    """audit2 #7: the memory search is 3 probes and 2 confirmations, not bisected to 5 %: the MST is the highest
    probed rate that passed twice, and the limit lies between it and ✗, up to 57 % apart in the published run
    (spring-platform 1,400 ✗ 2,200; quarkus-vertx's 7,900 ✗ 10,400 is 32 %)."""
    text = "\n".join(_published_section(tmp_path).body)
    assert "MST at the one rule" not in text
    assert ("MST: the highest of the probed rates that passed twice; the search here is short (3 probes, more while "
            "none passed, and 2 confirmations, stepping by a growing factor from ×1.15) and not bisected to 5 % as "
            "elsewhere, so the limit lies between the MST and the lowest probed rate that failed (✗), 6–57 % apart "
            "here (widest: spring-platform 1,400 ✗ 2,200)") in text


def test_the_resolution_comes_from_the_probes_recorded():
    def rec(port, rps, failing, confirmed=True):
        return {"port": port, **_steps(mst={"rps": rps, "confirmed": confirmed, "bounded": failing is not None,
                                            "first_failing_rps": failing, "slo_ms": 50.0, "estimate_rps": rps,
                                            "probes": [], "reason": None, "limit": None})}
    text = memory_report.resolution([rec("a", 1000, 1100), rec("b", 2000, 3000), rec("c", 900, 5000, confirmed=False),
                              rec("d", 4000, None)], {"mst_max_probes": 4, "mst_confirm_probes": 2},
                             {"growth": 1.2, "precision": 0.05})
    assert "(4 probes, more while none passed, and 2 confirmations, stepping by a growing factor from ×1.2)" in text
    assert text.endswith("10–50 % apart here (widest: b 2,000 ✗ 3,000): two MSTs within that gap are not told apart.")
    assert "bisected to 5 %" in text and text.count("not bisected") == 1
    assert memory_report.resolution([], {"mst_max_probes": 3}, {}).endswith("the lowest probed rate that failed (✗).")
    # without a probe cap the search is the one every section runs, bisected; the report states its precision
    uncapped = memory_report.resolution([rec("a", 1000, 1100)], {}, {"precision": 0.05})
    assert "not bisected" not in uncapped and "bisected to the precision stated below" in uncapped


def test_the_uncapped_warm_up_is_described_as_every_scenario_s():
    records = [{"warmup": {"seconds": 60.0, "rate": 1500, "settled": True}},
               {"warmup": {"seconds": 150.0, "rate": 1500, "settled": False}}]
    text = memory_report.warmed_up(records)
    assert text.startswith("Each cell's JVM warms up until steady") and "1 of 2 settled" in text
    assert memory_report.warmed_up([{}]) == ""


def test_a_bound_mst_enters_no_req_per_mib_and_a_partial_one_shows_its_count(tmp_path):
    """audit2 #8: quarkus-virtual at 512 MiB is ≥ 4,800 (one run never failed): its req/s per MiB is "–", as
    quarkus-reactive's (every run a bound); spring-platform's 512 MiB confirmed 2 of 3: its figure says so."""
    body = _published_section(tmp_path).body
    row = lambda port, limit: next(line for line in body if line.startswith(f"| {port} | {limit} |")).split(" | ")  # noqa: E731
    header = next(line for line in body if line.startswith("| port | limit (MiB) |")).split(" | ")
    at = header.index("req/s per MiB")
    assert row("quarkus-virtual", 512)[at] == "–" and row("quarkus-virtual", 512)[at - 4].startswith("≥ 4,800")
    assert row("quarkus-reactive", 512)[at] == "–"
    assert row("spring-platform", 512)[at] == "4.0 (3.9–4.2; 2 of 3 runs)"
    assert row("quarkus-vertx", 256)[at] == "51.8 (51.3–52.8)"


def test_the_idle_column_and_text_follow_the_setting(tmp_path):
    """review R7: with 500 idle connections (QUICK), the table's header and the body say 500, as the verdict does."""
    def quick(r):
        r["environment"]["settings"]["memory"]["idle_connections"] = 500
    section = _published_section(tmp_path, quick)
    text = "\n".join(section.body)
    assert "10,000" not in text.split("\n\n")[0] and "with 500 idle keep-alive connections beside it" in text
    assert "| 500 idle |" in text and "10,000 idle" not in text
    assert "(OOM-killed there in 3 of 3 with 500 idle connections)" in " ".join(section.verdict)
    assert "with 500 idle connections)" in section.decisions[0].choice    # the row says it too, at that count


def test_a_second_heap_share_gets_rows_of_its_own_and_the_decision_names_the_share_it_chose(tmp_path):
    """A run set at 75 % and at 50 % of the limit: each port's rows per share, the decision's setting names the share
    of the ports it names and the other share run; the matrix's row stays per port, at the larger share."""
    records = published()
    half = copy.deepcopy([r for r in records if r["port"] == "quarkus-vertx"])
    for r in half:
        r["jvm_options"] = [o.replace("MaxRAMPercentage=75", "MaxRAMPercentage=50") for o in r["jvm_options"]]
        if r["jvm"]["limit_mb"] == 128:                   # at half the heap it passes one limit lower
            r.update(status="complete", skipped=None, died=None, oom_kills=None, start_failure=None)
            r["cells"] = copy.deepcopy(next(x for x in records if x["port"] == "quarkus-vertx"
                                            and x["jvm"]["limit_mb"] == 256 and x["iteration"] == r["iteration"])["cells"])
    section = memory_report.render(runset.select(records + half, "memory", list(PORTS)), tmp_path)
    body = "\n".join(section.body)
    assert "| quarkus-vertx, heap 75 % | 256 |" in body and "| quarkus-vertx, heap 50 % | 128 |" in body
    [decision] = section.decisions
    assert decision.choice.startswith("quarkus-vertx, heap 50 % at 128 MiB")
    assert decision.settings == "-XX:MaxRAMPercentage=50 (as run; also run: 75)"
    [regime] = section.regimes
    assert regime.figures["quarkus-vertx"].median == 256 and "heap 75 %" in regime.setting
    assert memory_report.heap_setting(["75"], ["75"]) == "-XX:MaxRAMPercentage=75 (as run; no other fraction measured)"
    assert memory_report.heap_setting(["75", "50"], ["75", "50"]) == "-XX:MaxRAMPercentage=75 or 50 (each as run)"
