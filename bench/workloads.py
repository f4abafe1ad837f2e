"""What the bench runs: the workloads, the allocators, and the configurations.

A workload is a command line with a size knob (`full` for the timed runs, `ht` for the
smaller runs heaptrack can afford, `smoke` for --smoke). A configuration is how that
command is launched: bare (glibc, or Debian's allocator preloaded on its own), the shim
forwarding only (SHIM_TRACE=0), the shim recording (default settings, and SHIM_TIMING=all),
or heaptrack; a configuration name ending in `_3x` runs it at three times the size."""
import glob
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
BIN = os.path.join(OUT, "bin")
SHIM = os.path.join(ROOT, "target", "release", "libshim.so")
SHIMLOG = os.path.join(ROOT, "target", "release", "shimlog")
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def _backends():
    """The backends' names, from their one list (config/src/lib.rs, `BACKENDS`), as
    `shimlog generate backends` prints them."""
    try:
        out = subprocess.run([SHIMLOG, "generate", "backends"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"bench: {SHIMLOG} generate backends failed ({e}): run 'make build' first")
    return tuple(out.stdout.split())


BACKENDS = _backends()

# Debian's packages, preloaded on their own for the bare baselines (snmalloc and rpmalloc
# have none: their groups run without a bare baseline, see bench/backends.py).
DEBIAN_PKG = {"jemalloc": "libjemalloc2", "mimalloc": "libmimalloc2.0", "tcmalloc": "libtcmalloc-minimal4",
              "snmalloc": "(none)", "rpmalloc": "(none)"}


def python3():
    """The system interpreter (a pyenv/virtualenv shim would be a shell script in between)."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else shutil.which("python3")


def bare_preload(backend):
    """The library to preload for the bare run of backend ('' for glibc, None if missing)."""
    if backend == "glibc":
        return ""
    pat = {"jemalloc": "libjemalloc.so.2", "mimalloc": "libmimalloc.so.2*",
           "tcmalloc": "libtcmalloc_minimal.so.4"}.get(backend)
    if pat is None:
        return None
    found = sorted(glob.glob(os.path.join(LIBDIR, pat)), key=len)
    return found[0] if found else None


def build(name, flags=("-O2", "-pthread"), exe=None):
    """bench/workloads/NAME.c built into BIN (as bench/run.sh builds it, under the name `exe`,
    default NAME), again when it or rand.h (which the workloads include) is newer than the
    binary. Returns the binary's path."""
    src = os.path.join(ROOT, "bench", "workloads", name + ".c")
    exe = os.path.join(BIN, exe or name)
    deps = (src, os.path.join(ROOT, "bench", "workloads", "rand.h"))
    if not os.path.exists(exe) or max(os.path.getmtime(d) for d in deps) > os.path.getmtime(exe):
        os.makedirs(BIN, exist_ok=True)
        subprocess.run(["cc", *flags, "-o", exe, src], check=True)
    return exe


def cc1_argv(src, asm_out):
    """gcc's compiler proper with the arguments the driver gives it for `gcc -O2 -g -S`.

    Run directly so that every tool sees the same single process: heaptrack traces only the
    process it starts, not the cc1 the gcc driver would fork."""
    p = subprocess.run(["gcc", "-###", "-O2", "-g", "-S", src, "-o", asm_out],
                       capture_output=True, text=True, check=True)
    for line in p.stderr.splitlines():
        words = shlex.split(line)
        if words and os.path.basename(words[0]) == "cc1":
            return words
    raise RuntimeError("gcc -### printed no cc1 command line")


@dataclass
class Workload:
    name: str
    title: str
    kind: str                      # micro | real | startup
    argv: object                   # size -> argv
    full: int
    ht: int
    smoke: int
    env: dict = field(default_factory=dict)
    scalable: bool = True          # the size knob scales the work (not so for gcc, /bin/true)
    expect: str = ""               # regex the program's output must match
    calls_re: str = r"calls=(\d+)"  # the program's own count of malloc-family calls (groups summed)


def workloads():
    b = lambda name: os.path.join(BIN, name)
    py = python3()
    script = os.path.join(ROOT, "bench", "workloads", "alloc_heavy.py")
    demo_src = os.path.join(ROOT, "workloads", "demo.c")
    asm = os.path.join(OUT, "cc1-demo.s")
    cc1 = cc1_argv(demo_src, asm) if shutil.which("gcc") else None
    ws = [
        Workload("single", "1 thread: malloc/free pairs, 8-512 B", "micro",
                 lambda n: [b("single"), str(n)], 3_000_000, 300_000, 20_000,
                 expect=r"single: calls=\d+"),
        Workload("prodcons", "2 threads: malloc on one, free on the other", "micro",
                 lambda n: [b("prodcons"), str(n), "1"], 1_000_000, 200_000, 20_000,
                 expect=r"prodcons: calls=\d+ threads=2 bad=0"),
        Workload("realloc_aligned", "realloc growth + posix_memalign/aligned_alloc/memalign", "micro",
                 lambda n: [b("realloc_aligned"), str(n)], 100_000, 30_000, 2_000,
                 expect=r"realloc_aligned: calls=\d+ misaligned=0"),
        Workload("demo", "workloads/demo.c (make demo's workload), 4 threads x 100000 iterations", "micro",
                 lambda n: [b("demo"), "4", str(n)], 100_000, 20_000, 5_000,
                 expect=r"demo: threads=4 .* errors=0", calls_re=r"allocations=(\d+) .*frees=(\d+)"),
        Workload("python3", "python3 alloc_heavy.py, PYTHONMALLOC=malloc", "real",
                 lambda n: [py, script, str(n)], 1_500, 300, 20,
                 env={"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"},
                 expect=r"alloc_heavy: rounds=\d+ total=\d+", calls_re=""),
    ]
    if cc1:
        ws.append(Workload("gcc", "gcc (cc1) -O2 -g compiling workloads/demo.c", "real",
                           lambda n: list(cc1), 1, 1, 1, scalable=False, expect=r"^$", calls_re=""))
    ws.append(Workload("startup", "/bin/true: start-up and exit cost per process", "startup",
                       lambda n: ["/bin/true"], 1, 1, 1, scalable=False, expect=r"^$", calls_re=""))
    return ws




def clean_env():
    """The bench's environment without anything that would change what a run measures."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("SHIM_") or k.startswith("MIMALLOC_") or k.startswith("HEAPTRACK")
                   or k in ("LD_PRELOAD", "MALLOC_CONF", "PYTHONMALLOC", "PYTHONHASHSEED"))}
    env["LC_ALL"] = "C"
    # An in-flight directory of the bench's own: dead files other programs left in the user's
    # (whose logs may be gone) are not the bench's to reclaim, nor lines in its runs' stderr.
    env["SHIM_INFLIGHT_DIR"] = os.path.join("/dev/shm", f"shim-bench-{os.getuid()}")
    return env


def launch(w, size, backend, config, tag, extra_env=None):
    """(argv, env overrides, log glob or None, heaptrack output stem or None) for one run."""
    if config.endswith("_3x"):  # the same configuration at three times the size
        config, size = config[:-3], size * 3
    argv = w.argv(size)
    over = dict(w.env)
    log_glob = ht_stem = None
    if config == "bare":
        lib = bare_preload(backend)
        if lib:
            over["LD_PRELOAD"] = lib
    elif config == "heaptrack":
        ht_stem = os.path.join(OUT, "ht", tag)
        argv = [shutil.which("heaptrack") or "heaptrack", "-o", ht_stem] + argv
    else:
        over["LD_PRELOAD"] = SHIM
        over["SHIM_BACKEND"] = backend
        log_glob = os.path.join(OUT, "logs", tag + ".*.shimlog")
        over["SHIM_LOG"] = os.path.join(OUT, "logs", tag + ".%p.shimlog")
        if config == "off":
            over["SHIM_TRACE"] = "0"
        elif config == "rec_all":
            over["SHIM_TIMING"] = "all"
    over.update(extra_env or {})
    return argv, over, log_glob, ht_stem


def shown(argv, over):
    """The command as someone would type it from the repository root."""
    def rel(s):
        if s.startswith(ROOT + os.sep):
            return os.path.relpath(s, ROOT)
        return s
    parts = [f"{k}={shlex.quote(rel(v))}" for k, v in over.items()]
    parts += [shlex.quote(rel(a)) for a in argv]
    return " ".join(parts)


def program_calls(w, output):
    """The malloc-family call count the program reports, or None."""
    if not w.calls_re:
        return None
    m = re.search(w.calls_re, output)
    return sum(int(x) for x in m.groups()) if m else None
