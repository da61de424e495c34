"""JDK 25's AOT cache for one port (JEPs 483, 514, 515), made the way Spring Boot and Quarkus document it and
trained on the real endpoint: the startup scenario's "aot" variant and `just profile NAME RATE aot`.

The port runs with -XX:AOTCacheOutput (JDK 25's one-step workflow, JEP 514) while the endpoint serves
`training_rate` req/s for `training_seconds`; on SIGTERM the JVM writes the cache. Spring Boot's ports are first
extracted (`java -Djarmode=tools -jar app.jar extract`, which Spring Boot's reference requires for the cache).
The variant runs with -XX:AOTMode=on: a cache the JVM cannot use stops the run instead of being silently ignored.
"""
from __future__ import annotations

import shutil
import subprocess
import time

from . import ports
from .errors import Fatal
from .paths import BUILD, ROOT
from .target import target_url

AOT_DIR = BUILD / "aot"
STOP_S = 300          # a training JVM writes its cache on exit: minutes on a slow machine


def train(port: ports.Port, settings: dict, gen, token: str, rate: float, seconds: float
          ) -> tuple[ports.Variant, dict]:
    """The port's AOT cache, made by a training run on the real endpoint: the variant that uses it, and what the
    training cost."""
    jdk = ports.java_home()                # each lookup runs `java -version`: once
    java = jdk / "bin" / "java"
    out = AOT_DIR / port.name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    began = time.monotonic()
    jar = port.jar_path
    if port.family == "spring":           # Spring Boot's cache needs the extracted jar (its reference, "AOT Cache")
        run = subprocess.run([str(java), "-Djarmode=tools", "-jar", str(jar), "extract", "--destination",
                              str(out / "app")], capture_output=True, text=True)
        if run.returncode:
            raise Fatal(f"{port.name}: `java -Djarmode=tools -jar {jar.name} extract` failed: "
                        f"{(run.stderr or run.stdout).strip()[-300:]}")
        jar = out / "app" / jar.name
    cache = out / "app.aot"
    training = ports.Variant("aot-training", jdk, jar, (f"-XX:AOTCacheOutput={cache}",))
    running = ports.start(port, settings, token, variant=training)
    try:
        gen.run_rate(target_url(running, settings), rate, seconds, settings["load"]["connections"],
                     settings["cpus"]["generator"])
    finally:
        running.stop(timeout=STOP_S)
    if not cache.exists():
        raise Fatal(f"{port.name}: the training run wrote no AOT cache ({cache}): see {running.log}")
    info = {"training_s": round(time.monotonic() - began, 1), "cache_mb": round(cache.stat().st_size / 2**20, 1),
            "jar": str(jar.relative_to(ROOT)), "training_rate": rate, "training_seconds": seconds,
            "options": [f"-XX:AOTCacheOutput={cache.name}"],
            "run_options": [f"-XX:AOTCache={cache.name}", "-XX:AOTMode=on"]}
    return ports.Variant("aot", jdk, jar, (f"-XX:AOTCache={cache}", "-XX:AOTMode=on")), info
