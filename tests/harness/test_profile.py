"""`just profile`: the CPU-split classifier and arithmetic on hand-written stacks, the report's table,
and one end-to-end profile of a real port."""
import json
import os
import subprocess
import sys

import pytest

from harness import profile
from harness.report.cpu_split import newest_profiles, render_split
from harness.paths import ROOT


def sample(thread: str, *frames: str) -> list[str]:
    """A collapsed stack as async-profiler writes it with `threads`: the thread frame first, leaf last."""
    return [f"[{thread} tid=4242]", *frames]


LOOP = ["java/lang/Thread.run", "io/netty/util/concurrent/FastThreadLocalRunnable.run",
        "io/netty/channel/nio/NioEventLoop.run"]
TOMCAT = ["java/lang/Thread.run", "org/apache/tomcat/util/threads/TaskThread$WrappingRunnable.run",
          "org/apache/coyote/http11/Http11Processor.service", "org/apache/catalina/core/StandardWrapperValve.invoke",
          "org/springframework/web/servlet/DispatcherServlet.doDispatch",
          "bench/spring/mvc/UserController.user"]


@pytest.mark.parametrize("frames, category", [
    (LOOP + ["io/netty/channel/nio/NioEventLoop.processSelectedKeys", "io/netty/buffer/AbstractByteBuf.writeBytes"],
     "HTTP server"),
    (LOOP + ["io/vertx/core/http/impl/Http1xServerConnection.handleMessage", "java/lang/String.indexOf"], "HTTP server"),
    (TOMCAT[:5] + ["java/util/HashMap.get"], "framework"),
    (LOOP + ["io/quarkus/vertx/http/runtime/VertxHttpRecorder$1.handle",
             "io/smallrye/context/impl/wrappers/SlowContextualRunnable.run"], "framework"),
    (TOMCAT + ["bench/spring/mvc/JwtVerifier.email", "io/jsonwebtoken/impl/DefaultJwtParser.parse",
               "javax/crypto/Mac.doFinal", "com/sun/crypto/provider/HmacCore.engineDoFinal"], "JWT"),
    (LOOP + ["io/vertx/ext/auth/jwt/impl/JWTAuthProviderImpl.authenticate", "java/util/Base64$Decoder.decode"], "JWT"),
    (LOOP + ["io/smallrye/jwt/auth/principal/DefaultJWTTokenParser.parse", "org/jose4j/jws/JsonWebSignature.verify"],
     "JWT"),
    (TOMCAT + ["org/springframework/data/jpa/repository/support/SimpleJpaRepository.findById",
               "org/hibernate/internal/SessionImpl.find", "java/util/HashMap.put"], "ORM/mapping"),
    (TOMCAT + ["org/hibernate/engine/jdbc/internal/ResultSetReturnImpl.extract",
               "com/zaxxer/hikari/pool/HikariProxyPreparedStatement.executeQuery",
               "com/mysql/cj/jdbc/ClientPreparedStatement.executeQuery", "com/mysql/cj/protocol/a/NativeProtocol.read",
               "java/io/BufferedInputStream.read"], "driver"),
    (LOOP + ["io/vertx/mysqlclient/impl/codec/MySQLDecoder.decode", "java/lang/String.<init>"], "driver"),
    # Netty is the HTTP server's transport and the reactive drivers' too: its frames count only when
    # nothing more specific calls them
    (LOOP + ["io/vertx/mysqlclient/impl/codec/MySQLDecoder.decode", "io/netty/buffer/AbstractByteBuf.readByte"],
     "driver"),
    (LOOP + ["io/vertx/sqlclient/impl/SocketConnectionBase.write", "io/vertx/core/net/impl/ConnectionBase.write",
             "io/netty/channel/AbstractChannelHandlerContext.write"], "driver"),
    (LOOP + ["io/vertx/core/net/impl/VertxHandler.channelRead", "io/netty/buffer/PooledByteBufAllocator.buffer"],
     "HTTP server"),  # transport with nothing above it: the HTTP server's
    (LOOP + ["io/vertx/core/http/impl/Http1xServerResponse.end", "io/vertx/core/net/impl/ConnectionBase.write",
             "io/netty/channel/AbstractChannelHandlerContext.write"], "HTTP server"),
    (["java/lang/Thread.run", "reactor/netty/resources/DefaultLoop$1.run",
      "io/asyncer/r2dbc/mysql/client/ReactorNettyClient.send", "reactor/netty/channel/FluxReceive.onInboundNext"],
     "driver"),
    (["java/lang/Thread.run", "reactor/netty/http/server/HttpServerOperations.onInboundNext",
      "io/netty/buffer/AbstractByteBuf.readBytes"], "HTTP server"),
    # /feed's downstream calls: the JDK HttpClient's selector thread and the RestClient above it are HTTP client,
    # Reactor Netty's client is not its server
    (["java/lang/Thread.run", "jdk/internal/net/http/HttpClientImpl$SelectorManager.run",
      "jdk/internal/net/http/SocketTube$InternalReadPublisher.read", "sun/nio/ch/SocketChannelImpl.read"],
     "HTTP client"),
    (TOMCAT + ["org/springframework/web/client/DefaultRestClient$DefaultResponseSpec.body",
               "java/util/concurrent/CompletableFuture.get"], "HTTP client"),
    (["java/lang/Thread.run", "reactor/netty/http/client/HttpClientOperations.onInboundNext",
      "io/netty/buffer/AbstractByteBuf.readBytes"], "HTTP client"),
    (TOMCAT + ["com/zaxxer/hikari/HikariDataSource.getConnection",
               "com/zaxxer/hikari/util/ConcurrentBag.borrow", "java/util/concurrent/SynchronousQueue.poll"], "pool"),
    (TOMCAT + ["org/springframework/http/converter/AbstractGenericHttpMessageConverter.write",
               "tools/jackson/databind/ObjectWriter.writeValue", "tools/jackson/core/json/UTF8JsonGenerator.writeString"],
     "JSON"),
    (LOOP + ["io/vertx/core/json/JsonObject.toBuffer", "io/vertx/core/json/jackson/JacksonCodec.encode",
             "com/fasterxml/jackson/core/json/WriterBasedJsonGenerator.writeString"], "JSON"),
    (LOOP + ["io/vertx/core/json/JsonObject.toBuffer"], "JSON"),  # not framework: io.vertx.core.json first
    # JSON that the JWT library calls is the token's parsing: JWT; JSON called by anything else stays JSON
    (TOMCAT + ["bench/spring/mvc/JwtVerifier.email", "io/jsonwebtoken/impl/DefaultJwtParser.parse",
               "io/jsonwebtoken/gson/io/GsonDeserializer.doDeserialize", "com/google/gson/Gson.fromJson",
               "java/lang/String.charAt"], "JWT"),
    (LOOP + ["io/vertx/ext/auth/impl/jose/JWT.decode", "io/vertx/core/json/JsonObject.<init>",
             "com/fasterxml/jackson/core/json/UTF8StreamJsonParser.nextToken"], "JWT"),
    (LOOP + ["io/vertx/ext/web/impl/RouterImpl.handle", "bench/quarkus/vertx/UserRoute.lambda$user$0",
             "io/vertx/core/json/JsonObject.toBuffer", "com/fasterxml/jackson/core/json/UTF8JsonGenerator.writeString"],
     "JSON"),
    (LOOP + ["io/vertx/core/json/JsonObject.toBuffer", "io/vertx/core/buffer/impl/BufferImpl.appendBytes"], "JSON"),
    # Vert.x's buffers are transport too: its read buffers are HTTP server unless the driver reads them
    (LOOP + ["io/vertx/core/net/impl/VertxHandler.channelRead",
             "io/vertx/core/buffer/impl/PartialPooledByteBufAllocator.ioBuffer"], "HTTP server"),
    (LOOP + ["io/vertx/mysqlclient/impl/codec/MySQLDecoder.decode", "io/vertx/core/buffer/impl/BufferImpl.getBytes"],
     "driver"),
    (["java/lang/Thread.run", "java/util/concurrent/ThreadPoolExecutor.runWorker", "java/util/HashMap.resize"], "other"),
    (["[unknown]"], "other"),
])
def test_category_by_the_first_mapped_frame_from_the_leaf(frames, category):
    assert profile.classify(sample("worker", *frames)) == category


def test_pool_before_driver_for_the_vertx_pool_inside_the_driver_package():
    frames = LOOP + ["io/vertx/sqlclient/impl/PoolImpl.acquire", "io/vertx/sqlclient/impl/pool/SqlConnectionPool.acquire",
                     "java/util/ArrayDeque.poll"]
    assert profile.classify(sample("vert.x-eventloop-thread-0", *frames)) == "pool"
    assert profile.package_category("io/vertx/sqlclient/impl/pool/SqlConnectionPool.acquire") == "pool"
    assert profile.package_category("io/vertx/sqlclient/impl/SqlClientBase.query") == "driver"
    assert profile.package_category("io.vertx.sqlclient.impl.pool.SqlConnectionPool.acquire") == "pool"  # dotted style


def test_kernel_leaf_wins_over_every_package():
    frames = TOMCAT + ["com/mysql/cj/protocol/a/NativeProtocol.send", "java/net/Socket$SocketOutputStream.write",
                       "__libc_send", "entry_SYSCALL_64_after_hwframe_[k]", "tcp_sendmsg_[k]"]
    assert profile.classify(sample("http-nio-8080-exec-3", *frames)) == "kernel"
    # a kernel frame below the leaf is not enough: the sample ran user code
    assert profile.classify(sample("http-nio-8080-exec-3", "do_syscall_64_[k]", *TOMCAT[:3])) == "HTTP server"


@pytest.mark.parametrize("thread, frames, category", [
    ("C2 CompilerThread0", ["thread_native_entry", "CompileBroker::compiler_thread_loop", "Compile::Compile"], "JIT"),
    ("C1 CompilerThre", ["thread_native_entry", "Compilation::compile_method"], "JIT"),
    ("C2 CompilerThread1", ["thread_native_entry", "clear_page_erms_[k]"], "JIT"),  # thread rules before the kernel leaf
    ("GC Thread#0", ["thread_native_entry", "G1ParEvacuateFollowersClosure::do_void"], "GC"),
    ("G1 Conc#0", ["thread_native_entry", "G1ConcurrentMark::mark_from_roots"], "GC"),
    ("G1 Refine#0", ["thread_native_entry", "G1ConcurrentRefineThread::run_service"], "GC"),
    ("G1 Service", ["thread_native_entry", "G1ServiceThread::run_service"], "GC"),
    ("VM Thread", ["thread_native_entry", "VMThread::inner_execute", "VM_G1CollectForAllocation::doit",
                   "G1CollectedHeap::do_collection_pause_at_safepoint"], "GC"),
    ("VM Thread", ["thread_native_entry", "VMThread::inner_execute", "SafepointSynchronize::begin"], "other"),
    ("VM Thread", ["thread_native_entry", "VMThread::inner_execute", "SafepointSynchronize::begin", "schedule_[k]"],
     "kernel"),
])
def test_thread_name_rules(thread, frames, category):
    assert profile.classify(sample(thread, *frames)) == category


def test_a_java_thread_named_like_nothing_special_is_classified_by_its_frames():
    # "Compiler" as a word inside an app thread's name is not a compiler thread
    assert profile.classify(sample("my-Compiler-pool", *LOOP)) == "HTTP server"
    assert profile.classify(["io/netty/channel/nio/NioEventLoop.run"]) == "HTTP server"  # no thread frame at all


def test_no_table_entry_is_shadowed_by_an_earlier_shorter_prefix():
    seen = []
    for prefix, category in profile.PACKAGES:
        assert category in profile.CATEGORIES or category == profile.TRANSPORT
        for earlier in seen:
            assert not (prefix + ".").startswith(earlier + "."), f"{prefix} is shadowed by {earlier}"
        seen.append(prefix)


def test_parse_collapsed_and_count():
    text = ("[vert.x-eventloop-thread-0 tid=11];io/netty/channel/nio/NioEventLoop.run;tcp_sendmsg_[k] 30\n"
            "[vert.x-eventloop-thread-0 tid=11];io/netty/channel/nio/NioEventLoop.run;io/vertx/mysqlclient/impl/"
            "MySQLSocketConnection.doSchedule;java/lang/Object.hashCode 12\n"
            "[C2 CompilerThread0 tid=7];thread_native_entry;Compile::Compile 8\n"
            "[tid=99];start_thread;java/util/HashMap.get 5\n"
            "\n")
    stacks = profile.parse_collapsed(text)
    assert [n for _, n in stacks] == [30, 12, 8, 5]
    counts, other = profile.count_categories(stacks)
    assert counts["kernel"] == 30 and counts["driver"] == 12 and counts["JIT"] == 8 and counts["other"] == 5
    assert set(counts) == set(profile.CATEGORIES) and counts["GC"] == 0
    assert other.most_common(1)[0] == ("java.util.HashMap.get", 5)


def test_split_arithmetic_and_agreement():
    counts = {"HTTP server": 400, "driver": 300, "kernel": 300}
    # 1000 samples at 1000 µs = 1.0 s of profiled CPU; 1.05 s measured over 10,000 requests: 105 µs/request
    s = profile.split(counts, 1000, app_cpu_s=1.05, requests=10_000)
    assert s["samples"] == 1000 and s["profiler_cpu_s"] == 1.0
    assert s["app_cpu_us_per_request"] == pytest.approx(105)
    assert s["categories"]["HTTP server"]["share"] == pytest.approx(0.4)
    assert s["categories"]["HTTP server"]["us_per_request"] == pytest.approx(42)
    assert s["categories"]["JSON"] == {"samples": 0, "cpu_s": 0.0, "share": 0.0, "us_per_request": 0.0}
    assert list(s["categories"]) == profile.CATEGORIES
    assert sum(c["us_per_request"] for c in s["categories"].values()) == pytest.approx(105)
    assert s["agreement"] == pytest.approx(1 / 1.05, abs=1e-3) and s["trustworthy"]
    assert s["agreement_samples_x_interval"] == s["agreement"] and s["samples_x_interval_s"] == 1.0


def test_shares_and_the_total_come_from_the_cpu_time_each_sample_carries():
    # the same 1000 samples, but the kernel's were delivered late: 1.5 ms each on average
    samples = {"HTTP server": 400, "driver": 300, "kernel": 300}
    cpu_ns = {"HTTP server": 400_000_000, "driver": 300_000_000, "kernel": 450_000_000}
    s = profile.split(samples, 1000, app_cpu_s=1.2, requests=10_000, cpu_ns=cpu_ns)
    assert s["samples"] == 1000 and s["samples_x_interval_s"] == 1.0 and s["profiler_cpu_s"] == 1.15
    assert s["categories"]["kernel"]["samples"] == 300 and s["categories"]["kernel"]["cpu_s"] == 0.45
    assert s["categories"]["kernel"]["share"] == pytest.approx(0.45 / 1.15, abs=1e-4)
    assert s["categories"]["kernel"]["us_per_request"] == pytest.approx(120 * 0.45 / 1.15, abs=0.01)
    assert s["agreement"] == pytest.approx(1.15 / 1.2, abs=1e-3) and s["trustworthy"]
    assert s["agreement_samples_x_interval"] == pytest.approx(1 / 1.2, abs=1e-3)  # would be outside 15 %


@pytest.mark.parametrize("measured, trusted", [(1.0, True), (1.17, True), (0.87, True), (1.18, False), (0.86, False)])
def test_the_profile_is_trusted_only_within_15_percent(measured, trusted):
    # the profiler saw 1.0 s of CPU; the Sampler measured `measured` s
    assert profile.split({"other": 100}, 10_000, app_cpu_s=measured, requests=100)["trustworthy"] is trusted


def test_nothing_measured_is_not_trusted():
    s = profile.split({"other": 0}, 1000, app_cpu_s=0.0, requests=0)
    assert s["agreement"] is None and s["app_cpu_us_per_request"] is None and not s["trustworthy"]


def _record(port, utc, agreement=1.02, trustworthy=True):
    s = profile.split({"HTTP server": 60, "driver": 40}, 1000, app_cpu_s=0.1, requests=1000)
    return {"port": port, "rate_rps": 5000, "utc": utc, "profile_seconds": 30, "step": {"achieved_rps": 4999.0},
            "files": {"flame_graph": "flame.html"}, **s, "agreement": agreement, "trustworthy": trustworthy}


def test_render_split_uses_the_newest_profile_per_port(tmp_path):
    profiles = tmp_path / "profiles"
    for name, record in [("quarkus-vertx-5000rps-20260101T000000Z", _record("quarkus-vertx", "2026-01-01T00:00:00+00:00")),
                         ("quarkus-vertx-5000rps-20260102T000000Z", _record("quarkus-vertx", "2026-01-02T00:00:00+00:00")),
                         ("spring-platform-5000rps-20260101T000000Z",
                          _record("spring-platform", "2026-01-01T00:00:00+00:00", 0.7, False))]:
        (profiles / name).mkdir(parents=True)
        (profiles / name / "split.json").write_text(json.dumps(record))
    lines = render_split(tmp_path)
    assert lines[0].startswith("| port | app CPU µs/req | HTTP server | HTTP client | framework | JWT | ORM/mapping | driver | pool "
                               "| JSON | kernel | JIT | GC | other | app cs/req (vol+invol) | DB cs/req | threads ran | "
                               "profile")
    rows = [l for l in lines if l.startswith("| quarkus") or l.startswith("| spring")]
    assert [r.split(" | ")[0] for r in rows] == ["| spring-platform", "| quarkus-vertx"]  # harness order
    vertx = rows[1]
    assert "20260102T000000Z/flame.html" in vertx and "| 100.0 | 60.0 | 0.0 |" in vertx
    assert "not trustworthy" in rows[0] and "not trustworthy" not in vertx
    notes = [l for l in lines if l.startswith("- ")]
    assert len(notes) == 3 and "5,000 req/s" in notes[1] and "agreement 1.02" in notes[1]
    assert "spring-platform, quarkus-vertx: profiled before profiles recorded their machine" in notes[2]
    assert "agreement 0.70" in notes[0] and "not trustworthy" in notes[0]


def test_a_profile_with_settings_of_its_own_is_a_row_of_its_own(tmp_path):
    profiles = tmp_path / "profiles"
    tuned = {**_record("spring-webflux", "2026-01-03T00:00:00+00:00"),
             "framework_overrides": {"JAVA_TOOL_OPTIONS": "-Dreactor.netty.ioWorkerCount=2"}}
    for name, record in [("spring-webflux-5000rps-20260101T000000Z", _record("spring-webflux", "2026-01-01T00:00:00+00:00")),
                         ("spring-webflux-5000rps-20260103T000000Z", tuned)]:
        (profiles / name).mkdir(parents=True)
        (profiles / name / "split.json").write_text(json.dumps(record))
    rows = [l.split(" | ")[0] for l in render_split(tmp_path) if l.startswith("| spring")]
    # newer, but with a JVM flag: beside the defaults' profile, never in its place
    assert rows == ["| spring-webflux", "| spring-webflux + `JAVA_TOOL_OPTIONS=-Dreactor.netty.ioWorkerCount=2`"]


def test_render_split_without_profiles_is_empty(tmp_path):
    assert render_split(tmp_path) == []


def test_a_failed_download_of_the_profiler_is_one_clear_line(tmp_path, monkeypatch):
    from harness.errors import Fatal
    monkeypatch.setattr(profile, "AP_DIR", tmp_path / "async-profiler")
    monkeypatch.setattr(profile.ports, "java_home", lambda: tmp_path)
    monkeypatch.setattr(profile.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 1, "[ERROR] Failed to execute goal ...: Could not resolve artifact tools.profiler:async-profiler:jar:4.2\n", ""))
    with pytest.raises(Fatal) as failure:
        profile.profiler_library()
    message = str(failure.value)
    assert "\n" not in message and "tools.profiler:async-profiler:4.2" in message and "Could not resolve" in message
    assert not (tmp_path / "async-profiler" / "libasyncProfiler.so").exists()


def test_profile_is_a_harness_verb_and_a_recipe():
    from harness import __main__ as cli
    with pytest.raises(SystemExit):
        cli.main(["profile", "no-such-port"])
    justfile = (ROOT / "justfile").read_text()
    assert 'profile NAME RATE="" VARIANT="warm" PATH="" LATENCY_MS="0" DB_LATENCY_MS="0": _venv _tools' in justfile
    run = subprocess.run([sys.executable, "-m", "harness", "profile", PORT, "1000", "lukewarm"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    message = (run.stdout + run.stderr).strip()
    assert run.returncode != 0 and message.endswith("choose one of warm, cold, aot, cold-aot, jdk21-cj8") and "\n" not in message


def test_a_downstream_latency_needs_a_feed_path():
    run = subprocess.run([sys.executable, "-m", "harness", "profile", PORT, "1000", "warm", "", "50"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    message = (run.stdout + run.stderr).strip()
    assert run.returncode != 0 and "LATENCY_MS is the downstream's latency" in message and "\n" not in message


@pytest.mark.parametrize("args, says", [
    (["warm", "", "0", "-5"], "DB_LATENCY_MS must be 0 or more milliseconds"),
    (["warm", "", "0", "soon"], "DB_LATENCY_MS must be a number of milliseconds"),
    (["jdk21-cj8"], "the jdk21-cj8 variant exists for spring-platform, spring-virtual, quarkus-virtual only"),
])
def test_a_database_latency_or_a_runtime_the_port_lacks_is_refused_in_one_line(args, says):
    run = subprocess.run([sys.executable, "-m", "harness", "profile", PORT, "1000", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    message = (run.stdout + run.stderr).strip()
    assert run.returncode != 0 and says in message and "\n" not in message


def test_a_profile_at_a_database_latency_or_on_jdk21_is_a_row_of_its_own(tmp_path):
    profiles = (("spring-platform-800rps-20260101T000000Z", {}),
                ("spring-platform-800rps-db5ms-20260102T000000Z", {"db_latency_ms": 5}),
                ("spring-platform-800rps-db5ms-jdk21-cj8-20260103T000000Z", {"db_latency_ms": 5, "variant": "jdk21-cj8"}))
    for day, (name, extra) in enumerate(profiles, start=1):
        (tmp_path / "profiles" / name).mkdir(parents=True)
        record = _record("spring-platform", f"2026-01-0{day}T00:00:00+00:00")
        (tmp_path / "profiles" / name / "split.json").write_text(json.dumps(record | extra))
    assert sorted(newest_profiles(tmp_path)) == [
        "spring-platform", "spring-platform (jdk21-cj8), database +5 ms", "spring-platform, database +5 ms"]


def test_a_profile_of_another_path_is_a_row_of_its_own(tmp_path):
    for name, path in (("spring-virtual-2500rps-20260101T000000Z", None),
                       ("spring-virtual-400rps-feed-calls-3-20260102T000000Z", "feed?calls=3")):
        (tmp_path / "profiles" / name).mkdir(parents=True)
        record = _record("spring-virtual", "2026-01-0%sT00:00:00+00:00" % (2 if path else 1))
        (tmp_path / "profiles" / name / "split.json").write_text(json.dumps(record | ({"path": path} if path else {})))
    assert sorted(newest_profiles(tmp_path)) == ["spring-virtual", "spring-virtual at /feed?calls=3"]


def test_a_cold_profile_counts_the_requests_of_its_own_seconds():
    intervals = [{"t_s": t, "completed": 100 * t} for t in range(1, 7)]     # 100, 200, ... completed per second
    assert profile.completed_between(intervals, 2.0, 4.0) == 300 + 400
    assert profile.completed_between(intervals, 2.5, 4.0) == 150 + 400      # half of second 3 (2-3 s): 150


def test_a_profile_of_a_variant_is_a_row_of_its_own(tmp_path):
    for name, variant in (("quarkus-vertx-5000rps-20260101T000000Z", None),
                          ("quarkus-vertx-5000rps-cold-aot-20260102T000000Z", "cold-aot")):
        (tmp_path / "profiles" / name).mkdir(parents=True)
        record = _record("quarkus-vertx", "2026-01-0%sT00:00:00+00:00" % (2 if variant else 1))
        (tmp_path / "profiles" / name / "split.json").write_text(json.dumps(record | ({"variant": variant} if variant else {})))
    assert sorted(newest_profiles(tmp_path)) == ["quarkus-vertx", "quarkus-vertx (cold-aot)"]


# --- end to end ------------------------------------------------------------------------------------

PORT = "quarkus-vertx"  # the quickest to start


def test_profile_quarkus_vertx_end_to_end(tmp_path):
    env = dict(os.environ, BENCH_RESULTS=str(tmp_path), BENCH_LOAD_PORT="18083",
               BENCH_PROFILE_SECONDS="5", BENCH_PROFILE_INTERVAL_US="250",
               BENCH_WARMUP_WINDOW_SECONDS="2", BENCH_WARMUP_MAX_SECONDS="6",
               BENCH_LOAD_CONNECTIONS="16")
    env.pop("LOADGEN", None)  # the default generator
    run = subprocess.run([sys.executable, "-m", "harness", "profile", PORT, "1000"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [out] = list((tmp_path / "profiles").glob(f"{PORT}-1000rps-*Z"))
    for name in ("flame.html", "collapsed.txt", "collapsed-cpu-ns.txt.gz", "recording.jfr", "split.json"):
        assert (out / name).stat().st_size > 0, name
    html = (out / "flame.html").read_text()
    # async-profiler's flame graph: a canvas drawn from its (prefix-compressed) pool of frame names
    assert html.lstrip().lower().startswith("<!doctype html") and "<canvas id='canvas'" in html
    assert "const cpool = [" in html and f"<h1>{out.name}</h1>" in html
    assert (out / "recording.jfr").read_bytes()[:4] == b"FLR\0"
    record = json.loads((out / "split.json").read_text())
    shown = json.dumps({k: v for k, v in record.items() if k != "other_top_frames"})[:3000]
    assert record["port"] == PORT and record["rate_rps"] == 1000 and record["interval_us"] == 250, shown
    assert record["categories"]["HTTP server"]["samples"] > 0, shown
    assert record["categories"]["driver"]["samples"] > 0, shown
    assert record["samples"] == sum(c["samples"] for c in record["categories"].values()), shown
    assert record["app_cpu_us_per_request"] > 0 and record["agreement"] > 0 and record["window_inside_step"], shown
    assert set(record["step"]["statuses"]) == {"200"}, shown
    # the unprofiled step's kernel events per request, and the machine the profile ran on
    assert record["unprofiled_kernel"]["app_ctx_voluntary_per_request"] > 0, shown
    assert record["unprofiled_kernel"]["app_threads_ran"] >= 1 and record["machine"]["kernel"], shown
    # the one warm-up of the scenarios: windows at the profile's rate, each a step judged by the rule
    assert record["warmup"]["windows"] and 0 < record["warmup"]["rate"] <= 1000, shown
    assert record["warmup_seconds"] <= 6 + 5, shown
    for phase in ("profile: starting", "warming up", "profile: warm-up 1000/s: p50", "profiling", "profile: wrote"):
        assert phase in run.stdout, run.stdout
    # the table the report will show
    lines = render_split(tmp_path)
    assert any(l.startswith(f"| {PORT}, poisson arrivals |") for l in lines)
    assert not __import__("harness.ports", fromlist=["port_busy"]).port_busy("127.0.0.1", 18083)


def test_a_cold_profile_on_the_aot_cache_starts_its_window_at_the_first_answer(tmp_path):
    env = dict(os.environ, BENCH_RESULTS=str(tmp_path), BENCH_LOAD_PORT="18083", BENCH_PROFILE_SECONDS="4",
               BENCH_STARTUP_TRAINING_RATE="200", BENCH_STARTUP_TRAINING_SECONDS="3", BENCH_LOAD_CONNECTIONS="16")
    env.pop("LOADGEN", None)
    run = subprocess.run([sys.executable, "-m", "harness", "profile", PORT, "500", "cold-aot"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [out] = list((tmp_path / "profiles").glob(f"{PORT}-500rps-cold-aot-*Z"))
    record = json.loads((out / "split.json").read_text())
    shown = json.dumps({k: v for k, v in record.items() if k != "other_top_frames"})[:3000]
    # no warm-up and no unprofiled step: the window opens 3 s into the load, which starts at the first answer
    assert record["variant"] == "cold-aot" and "warmup" not in record and "profiling_overhead" not in record, shown
    assert record["window_in_step_s"][0] < 5 and record["window_inside_step"], shown
    assert record["aot"]["cache_mb"] > 0 and "-XX:AOTMode=on" in record["aot"]["run_options"], shown
    # requests counted from the window's own seconds: about the rate times the window
    assert 0.5 < record["requests"] / (500 * record["profile_seconds"]) < 1.5, shown
    assert "warming up" not in run.stdout and "on its AOT cache" in run.stdout, run.stdout


def test_ctrl_c_while_profiling_leaves_no_process_and_no_half_written_profile(tmp_path):
    import signal
    import uuid

    import psutil

    mark = uuid.uuid4().hex  # inherited by every process the run starts: the app, the generator, jcmd
    env = dict(os.environ, BENCH_RESULTS=str(tmp_path), BENCH_LOAD_PORT="18083", BENCH_PROFILE_SECONDS="10",
               BENCH_WARMUP_WINDOW_SECONDS="2", BENCH_WARMUP_MAX_SECONDS="4", BENCH_LOAD_CONNECTIONS="16", PROFILE_TEST_MARK=mark)
    env.pop("LOADGEN", None)
    run = subprocess.Popen([sys.executable, "-m", "harness", "profile", PORT, "500"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in run.stdout:
            seen.append(line)
            if "profile: profiling" in line:
                __import__("time").sleep(4)  # inside the 10-s profile window: async-profiler and JFR attached
                run.send_signal(signal.SIGINT)  # what Ctrl-C sends to the harness
                break
        seen.append(run.stdout.read())
        assert run.wait(timeout=60) == 130, "".join(seen)
    finally:
        if run.poll() is None:
            run.kill()

    def marked(p):
        try:
            return p.environ().get("PROFILE_TEST_MARK") == mark and p.status() != psutil.STATUS_ZOMBIE
        except (psutil.Error, OSError):
            return False
    __import__("time").sleep(1)
    left = [(p.pid, p.cmdline()[:3]) for p in psutil.process_iter() if marked(p)]
    assert not left, f"processes left behind: {left}"
    assert not list((tmp_path / "profiles").glob("*/*")), "a half-written profile was left"
    from harness import ports
    assert not ports.port_busy("127.0.0.1", 18083)
