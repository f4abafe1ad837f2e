"""The bench's verdicts and write-ups: the targets (met or not, and why), the terminal table
and BENCHMARKS.md, all computed from the results dict bench.py builds."""

import crashsafe
import ownalloc
import backends
import report_export

MICRO = ("single", "prodcons", "realloc_aligned", "demo")
TITLE = {"off": "SHIM_TRACE=0", "rec": "recording", "rec_all": "recording, SHIM_TIMING=all",
         "heaptrack": "heaptrack"}


def group(results, workload, backend, label="full"):
    for g in results["groups"]:
        if g["workload"] == workload and g["backend"] == backend and g["set"] == label:
            return g
    return None


def fig(g, cfg):
    return g["figures"]["configs"].get(cfg) if g else None


def f1(x, nd=1):
    return "n/a" if x is None else f"{x:.{nd}f}"


def ratio_s(f):
    if not f:
        return "n/a"
    return f"{f['ratio']:.3f} ({f['ratio_min']:.2f}-{f['ratio_max']:.2f})"


def full_groups(results):
    return [g for g in results["groups"] if g["set"] == "full"]


def cg_cfg(results, cfg):
    cg = results.get("callgrind") or {}
    return (cg.get("configs") or {}).get(cfg)


def shim_breakdown(results, n=5, cfg="rec"):
    """The top per-event instruction costs the shim adds on the calling thread."""
    rows = (results.get("callgrind") or {}).get(f"{cfg}_breakdown") or []
    extra = [r for r in rows if r["per_event"] - r["bare_per_event"] >= 1.0 and r["bare_per_event"] == 0]
    return ", ".join(f"{r['where']} {r['per_event']:.0f}" for r in extra[:n])


def startup_added(results, cfg, label="heaptrack", key="wall_s"):
    """Seconds (wall or CPU) a configuration adds to /bin/true: its start-up and exit cost."""
    f = fig(group(results, "startup", "glibc", label), cfg)
    return f["added_" + key[:-2] + "_s"] if f else 0.0


def net_ns(results, g, cfg, key="wall_s"):
    """ns per event a configuration adds beyond its fixed start-up and exit cost."""
    f = fig(g, cfg)
    if not f or not g.get("events"):
        return None
    return (f["added_" + key[:-2] + "_s"] - startup_added(results, cfg, g["set"], key)) / g["events"] * 1e9


def shim_net_ns(results, workload, key="wall_s"):
    """The shim's recording cost per event for the heaptrack comparison: from the full-size
    glibc runs (many more events than the heaptrack-size runs, so far less noise), net of
    its start-up cost."""
    return net_ns(results, group(results, workload, "glibc", "full"), "rec", key)


def heaptrack_ns(results, g, key="wall_s"):
    """(ns heaptrack adds per event, how it was measured) for a heaptrack-set group.

    Scalable workloads: heaptrack's marginal cost, (3x-size run - 1x-size run) / (the events
    in between), less bare's marginal cost per event (full-size bare run vs the 1x-size bare
    run): start-up and exit cancel out. Otherwise (gcc): its added time less what it adds
    to /bin/true."""
    import figures
    if "heaptrack_3x" in g["configs"]:
        ht = figures.marginal_ns(g["runs"], "heaptrack", "heaptrack_3x", g.get("events"), g.get("events_3x"), key)
        full = group(results, g["workload"], "glibc", "full")
        if ht is None or not full or not full.get("events") or full["events"] == g.get("events"):
            return None, ""
        k = "bare_wall_s" if key == "wall_s" else "bare_cpu_s"
        bare = (full["figures"][k] - g["figures"][k]) / (full["events"] - g["events"]) * 1e9
        return ht - bare, "marginal"
    return net_ns(results, g, "heaptrack", key), "net of /bin/true"


def clock_line(results):
    c = (results.get("clock_cost") or {}).get("ns_per_pair") or {}
    if not {"none", "shim", "rdtsc"} <= set(c):
        return ""
    return (f"Timestamps alone (bench/workloads/clock_cost.c, the same loop without the shim): RDTSC "
            f"before free and RDTSCP after malloc, as the shim stamps them, add "
            f"{c['shim'] - c['none']:.1f} ns per malloc+free pair ({(c['shim'] - c['none']) / 2:.1f} ns "
            f"per event) to the bare loop's {c['none']:.1f} ns; with plain RDTSC after malloc too they "
            f"add {c['rdtsc'] - c['none']:.1f} ns per pair. ")


def producer_line(results):
    """The calling thread's own CPU per event when it never waits (the drain runs)."""
    d = results.get("drain") or {}
    g = group(results, "single", "glibc")
    runs = [r for r in d.get("runs", []) if r.get("main_cpu_s") and r.get("events")]
    if not runs or not g or not g.get("events") or not g["figures"].get("bare_cpu_s"):
        return ""
    per = sorted(r["main_cpu_s"] / (r["events"] + (r.get("dropped") or 0)) * 1e9 for r in runs)
    bare = g["figures"]["bare_cpu_s"] / g["events"] * 1e9
    return (f"With SHIM_ON_FULL=drop (the drain runs, where the thread never waits for the recorder) "
            f"the calling thread's own CPU time is {per[len(per) // 2]:.1f} ns per event against bare "
            f"glibc's {bare:.1f}: {per[len(per) // 2] - bare:.1f} ns added by the hot path itself; the "
            f"rest of the wall-clock figure is time spent waiting for a free buffer "
            f"(SHIM_ON_FULL=block) when the recorder thread falls behind or is not scheduled, on "
            f"this shared 2-core machine (see the drain section for start-up). ")


def targets(results):
    out = []
    cg_bare, cg_off, cg_rec, cg_all = (cg_cfg(results, c) for c in ("bare", "off", "rec", "rec_all"))

    # 1. recording <= 20 ns/event on the one-thread workload
    per = []
    for b in ("glibc", "jemalloc", "mimalloc"):
        g = group(results, "single", b)
        r, a = fig(g, "rec"), fig(g, "rec_all")
        if r and "ns_per_event" in r:
            per.append((b, r["ns_per_event"], a.get("ns_per_event") if a else None, r))
    met = bool(per) and all(ns <= 20 for _, ns, _, _ in per)
    figure = "; ".join(f"{b}: {ns:.1f} ns/event (SHIM_TIMING=all: {f1(alln)})" for b, ns, alln, _ in per)
    why = ""
    if per and not met:
        why = (f"The wall-clock figure is the median over the pairs of (recording - bare) / events. "
               f"CPU time added per event, the recorder thread's compression included: "
               + ", ".join(f"{b} {r['cpu_ns_per_event']:.1f} ns" for b, _, _, r in per) + ". ")
        why += clock_line(results)
        why += producer_line(results)
        if cg_bare and cg_rec:
            why += (f"Callgrind counts {cg_rec['calling_thread'] - cg_bare['calling_thread']:.0f} more "
                    f"instructions per event on the calling thread than bare glibc "
                    f"({cg_off['calling_thread'] - cg_bare['calling_thread']:.0f} of them with SHIM_TRACE=0, i.e. "
                    f"forwarding alone), plus {cg_rec['other_threads']:.0f} per event on the recorder thread. "
                    f"Largest shim costs on the calling thread (instructions per event, file:function): "
                    f"{shim_breakdown(results)}. See the callgrind and timestamp sections.")
    out.append({"id": "record_ns", "target": "recording (default settings) adds <= 20 ns per event on the one-thread workload",
                "figure": figure, "met": met if per else None, "why": why})

    # 2. SHIM_TRACE=0 <= 2% over the bare backend
    rows, bad = [], []
    for g in full_groups(results):
        if g["workload"] == "startup":
            continue
        f = fig(g, "off")
        if f:
            rows.append((g, f))
            if f["ratio"] > 1.02:
                bad.append((g, f))
    met = bool(rows) and not bad
    worst = max(rows, key=lambda gf: gf[1]["ratio"]) if rows else None
    figure = (f"worst median ratio {worst[1]['ratio']:.3f} ({worst[0]['workload']}/{worst[0]['backend']}); "
              f"{len(rows) - len(bad)} of {len(rows)} workload/backend pairs within 1.02") if rows else ""
    why = ""
    if bad:
        parts = []
        for g, f in bad:
            s = f"{g['workload']}/{g['backend']} {ratio_s(f)}"
            if f["ratio_min"] <= 1.02:
                s += " (its spread reaches below 1.02)"
            parts.append(s)
        why = "Over 1.02: " + "; ".join(parts) + ". "
        if cg_bare and cg_off:
            d = cg_off['calling_thread'] - cg_bare['calling_thread']
            why += (f"On the one-thread workload forwarding executes {d:.0f} more instructions per event "
                    f"than bare glibc's {cg_bare['calling_thread']:.0f} ({100 * d / cg_bare['calling_thread']:.0f}% "
                    f"more; callgrind): {shim_breakdown(results, 6, 'off')} (instructions per event): the "
                    f"exported function's argument rules, the recording checks a forwarding call still "
                    f"makes (forward-only flag, thread state) and the backend dispatch. Against a "
                    f"malloc/free pair of ~{2 * cg_bare['calling_thread']:.0f} instructions, 2% is ~"
                    f"{0.04 * cg_bare['calling_thread']:.0f} instructions per pair, less than an interposer's "
                    f"extra call and return per event alone, so on a loop that does nothing but allocate "
                    f"the bound is out of reach in instructions. On the real programs, "
                    f"where the allocator is a smaller part of the run: " +
                    ", ".join(f"{g['workload']}/{g['backend']} {fig(g, 'off')['ratio']:.3f}"
                              for g in full_groups(results)
                              if g["workload"] in ("gcc", "python3") and fig(g, "off")) + ". ")
        if any(g["backend"] != "glibc" for g, _ in bad):
            m = results["machine"]
            why += (f"For jemalloc and mimalloc the bare baseline is Debian's library "
                    f"(libjemalloc2 {m.get('debian_libjemalloc2')}, libmimalloc2.0 {m.get('debian_libmimalloc2.0')}) "
                    f"while the shim forwards to the copy built into it "
                    f"({', '.join(sorted({g['backend'] + ' ' + str(g.get('backend_version')) for g, _ in bad if g['backend'] != 'glibc'}))}): "
                    f"a different version and build, so part of the difference is the allocator, not the shim. ")
        why += ("Runs on this shared 2-core machine vary by more than 2% from run to run (see the spreads), "
                "so a 2% bound cannot be confirmed here for every pair.")
    out.append({"id": "off_overhead", "target": "SHIM_TRACE=0 costs <= 2% over the bare backend",
                "figure": figure, "met": met if rows else None, "why": why})

    # 3. log bytes per event
    rows, bad = [], []
    for g in full_groups(results):
        f = fig(g, "rec")
        # Issue 22's limits (format version 5) for the one-thread workload, the demo and python3.
        limit = {"single": 2.5, "demo": 3.0, "python3": 1.5}.get(g["workload"], 4.0 if g["workload"] in MICRO else None)
        if not f or limit is None or "bytes_per_event" not in f:
            continue
        rows.append((g, f, limit))
        if f["bytes_per_event"] > limit:
            bad.append((g, f, limit))
    met = bool(rows) and not bad
    figure = "; ".join(f"{g['workload']}/{g['backend']} {f['bytes_per_event']:.2f}" for g, f, _ in rows)
    why = ""
    if bad:
        why = ("Over the limit: " + "; ".join(
            f"{g['workload']}/{g['backend']} {f['bytes_per_event']:.2f} > {lim:g} "
            f"(records {f.get('raw_bytes_per_event', 0):.2f} B/event before zstd, "
            f"compressed {f.get('raw_bytes_per_event', 0) / f['bytes_per_event']:.2f}x)"
            for g, f, lim in bad) +
            ". The frames are columnar (format version 5): where the bytes go, column by column, "
            "is in \"Columnar frames\" (bench/columns.py, recorder/examples/colbytes). ")
        lv = results.get("zstd_levels") or {}
        base = fig(group(results, "single", "glibc"), "rec")
        if lv and base and base.get("bytes_per_event"):
            best = min(v["bytes_per_event"] for v in lv.values())
            gain = 1 - best / base["bytes_per_event"]
            why += ((f"A higher zstd level barely helps ({100 * gain:.0f}% at best): " if gain < 0.2 else
                     f"A higher zstd level helps by {100 * gain:.0f}%: ") +
                    f"the one-thread workload on glibc gives {base['bytes_per_event']:.2f} B/event at the "
                    f"default level 1, " +
                    ", ".join(f"{v['bytes_per_event']:.2f} at SHIM_ZSTD_LEVEL={k} ({v['wall_s']:.2f} s wall)"
                              for k, v in lv.items()) + ". ")
    out.append({"id": "log_bytes", "target": "<= 2.5 log bytes per event on the one-thread workload, <= 3 on the demo, <= 1.5 on python3, <= 4 on the other microbenchmarks",
                "figure": figure, "met": met if rows else None, "why": why})

    # 4. drain rate
    d = results.get("drain") or {}
    rate = d.get("events_per_s")
    met = rate is not None and rate >= 20e6
    why = ""
    if rate is not None and not met:
        why = (f"The recorder thread spends {1e9 / rate:.0f} ns of CPU per event")
        if cg_rec:
            why += f" (callgrind: {cg_rec['other_threads']:.0f} instructions per event, mostly zstd's Huffman coding of literals)"
        why += "."
    out.append({"id": "drain", "target": "the recorder drains >= 20 M events/s",
                "figure": f"{rate / 1e6:.1f} M events/s (min {d['min'] / 1e6:.1f}, max {d['max'] / 1e6:.1f}; "
                          f"{d.get('dropped_total', 0)} events dropped in {len(d['runs'])} runs)" if rate else "n/a",
                "met": met if rate is not None else None, "why": why})

    # 5. >= 10x cheaper per event than heaptrack
    rows, bad = [], []
    for g in results["groups"]:
        if g["set"] != "heaptrack" or g["workload"] == "startup":
            continue
        r, (h, _) = shim_net_ns(results, g["workload"]), heaptrack_ns(results, g)
        if r is None or h is None:
            continue
        x = h / r if r > 0 else None  # None: the shim's figure is within the noise
        rows.append((g, r, h, x))
        if x is not None and x < 10:
            bad.append((g, r, h, x))
    met = bool(rows) and not bad
    figure = "; ".join(f"{g['workload']} {x:.0f}x ({h:.0f} vs {r:.1f} ns/event)" if x is not None else
                       f"{g['workload']} unresolved (heaptrack {h:.0f} ns/event, the shim's {r:.1f} is noise)"
                       for g, r, h, x in rows)
    why = ""
    if bad:
        cpu = []
        for g, _, _, _ in bad:
            rc, (hc, _) = shim_net_ns(results, g["workload"], "cpu_s"), heaptrack_ns(results, g, "cpu_s")
            if rc and hc:
                cpu.append(f"{g['workload']} {hc / rc:.1f}x" if rc > 0 else f"{g['workload']} inf")
        why = ("Under 10x: " + "; ".join(f"{g['workload']} {x:.1f}x" for g, _, _, x in bad) +
               (" (in CPU time, all processes and threads counted: " + "; ".join(cpu) + ")" if cpu else "") +
               ". Once its start-up (a few hundred ms: the heaptrack shell script and its interpreter "
               "process, measured on /bin/true) is set aside, heaptrack's cost per event on these "
               "workloads is a few hundred ns: it hands each call to its interpreter process through "
               "a pipe and caches backtraces, so its steady state is cheaper than its short runs "
               "suggest. The shim's per-event cost is what the first target's notes break down "
               "(the stamps, the record encoding, and waiting for the recorder); it would need to "
               "drop to about a tenth of heaptrack's figure. See the heaptrack section for how "
               "each figure is measured.")
    out.append({"id": "vs_heaptrack", "target": ">= 10x cheaper per event than heaptrack on every workload",
                "figure": figure, "met": met if rows else None, "why": why})

    # 6. shimlog stats >= 20 M events/s on one core, memory bounded
    st = [x for x in (results.get("stats_speed") or {}).get("logs", []) if x.get("events_per_cpu_s")]
    met = bool(st) and all(x["events_per_cpu_s"] >= 20e6 for x in st)
    figure = "; ".join(f"{x['name']} ({x['events'] / 1e6:.0f} M events) {x['events_per_cpu_s'] / 1e6:.1f} M events/s "
                       f"(range {min(x['rates']) / 1e6:.1f}-{max(x['rates']) / 1e6:.1f}), max RSS "
                       f"{x['maxrss_kb'] / 1024:.0f} MiB" for x in st)
    walls = [x for x in st if x.get("two_events_per_wall_s")]
    if walls:
        figure += ("; with the reader on a second thread (the default): " +
                   "; ".join(f"{x['name']} {x['two_events_per_wall_s'] / 1e6:.1f} M events per wall second"
                             for x in walls))
    why = ""
    if st and not met:
        byname = {x["name"]: x for x in st}
        base = byname.get("synthetic") or min(st, key=lambda x: x["events_per_cpu_s"])
        why = stats_time_split(results, base)
        many, z = byname.get("synthetic, 64 threads"), byname.get("synthetic, zstd -1")

        def ratio(x):
            """x's one-thread rate against the 8-thread synthetic log's, round by round."""
            r = x.get("rate_vs_first") or x["events_per_cpu_s"] / base["events_per_cpu_s"]
            return f"{r:.2f}x"
        if many and base is not many:
            why += (f"With 64 threads the same workload reads at {ratio(many)} "
                    "the 8-thread rate: a merge 7 matches deep instead of 3 or 4, and 64 streams' batches, "
                    "which no longer stay in the first-level cache between a record's decoding and its turn "
                    "(cachegrind, 2 M events: 7% more instructions, 1.6x the L1 data misses). ")
        if z and base is not z:
            why += (f"Huffman decoding of zstd's literals has its share: the same log written "
                    f"at zstd level -1 (SHIM_ZSTD_LEVEL=-1) reads at {ratio(z)} "
                    f"the rate, and is {z['file_bytes'] / base['file_bytes']:.2f}x the size; the default stays at "
                    "level 1, for the log-size target. ")
        both = byname.get("synthetic and demo capture together")
        if both and base is not both:
            why += (f"Two logs read together (a section each and their total) read at {ratio(both)} "
                    "the synthetic log's rate on its own: both logs' events go through one more merge, "
                    "by time across the logs, and feed the total's tracker as well. ")
        why += ("The same run varies by up to 25% "
                "with the load of the machine's neighbours: compare builds side by side, not runs. By default the reading runs on a "
                "second thread, which gives the wall-clock rate above on this 2-core machine.")
    out.append({"id": "stats_speed", "target": "shimlog stats >= 20 M events/s on one core",
                "figure": figure or "n/a", "met": met if st else None, "why": why})
    for t in ownalloc.targets(results.get("ownalloc")):
        out.append({"id": "ownalloc", **t})
    return out


def stats_time_split(results, base):
    """Where one-thread stats time goes on the synthetic log: the stage figures when the
    bench measured them, and what the 20 M events/s target means in cycles."""
    ns = 1e9 / base["events_per_cpu_s"]
    mhz = (results.get("machine") or {}).get("cpu_mhz")
    why = (f"On one thread (`--one-thread`) shimlog stats spends about {ns:.0f} ns per event on the "
           f"{base['name']} log; 20 M events/s is 50 ns per event")
    why += f", {50e-3 * mhz:.0f} cycles of this {mhz:.0f} MHz core. " if mhz else ". "
    st = ((results.get("stats_speed") or {}).get("stages") or {}).get("ns_per_event")
    if st:
        reader = st["zstd"] + st["decode"] + st["merge"]
        why += (f"Stage by stage in the same rounds (see the stats section): zstd decompression "
                f"{st['zstd']:.1f} ns, decoding the varint records {st['decode']:.1f} ns, the merge of "
                f"the 8 randomly interleaved thread streams {st['merge']:.1f} ns (the reader, "
                f"{reader:.0f} ns in all), and the analysis {st['analysis']:.1f} ns. ")
        missing = st["total"] - 50
        if missing > 0:
            why += (f"20 M events/s needs {missing:.0f} ns per event less, {missing / st['total']:.0%} of "
                    "the whole. ")
    why += ("The analysis is spread out. Its largest part is the live-block table "
            "(100,000 blocks live, freed at random): with its lookups left out the run takes about 0.61x "
            "the time on the 8-thread log (0.73x on the one-thread one), about 19 ns per event; about 7 of "
            "those come from a table too large for the caches, which the prefetch a few events ahead hides "
            "only in part (with 1,000 blocks live the lookups cost 12 ns; prefetching 16 or 32 events ahead "
            "instead of 8 changes nothing measurable; without the prefetch the run takes 30-70% longer), the "
            "rest is the lookups' own work. With lifetimes, threads, sizes and memory over time all left out "
            "the run takes 0.86-0.93x the time. (A build with switches for these, alternated runs on 20 M-event "
            "logs, at 80050c3.) In instructions (cachegrind, 2 M events): about 620 per event, at 3-4 per "
            "cycle, so 50 ns would need about 400. ")
    return why


def verdict(t):
    return {True: "met", False: "NOT met", None: "not measured"}[t["met"]]


def table(results):
    """The terminal table: one row per workload and backend."""
    hdr = (f"{'workload':<16}{'backend':<10}{'events':>10}{'bare s':>8}  {'TRACE=0 ratio':<20}"
           f"{'rec ratio':<20}{'rec ns/ev':>10}{'all ns/ev':>10}{'B/ev':>7}{'+RSS KiB':>10}")
    lines = [hdr, "-" * len(hdr)]
    for g in full_groups(results):
        off, rec, al = fig(g, "off"), fig(g, "rec"), fig(g, "rec_all")
        lines.append(
            f"{g['workload']:<16}{g['backend']:<10}{g.get('events') or 0:>10}"
            f"{f1(g['figures']['bare_wall_s'], 3):>8}  {ratio_s(off):<20}{ratio_s(rec):<20}"
            f"{f1(rec and rec.get('ns_per_event')):>10}{f1(al and al.get('ns_per_event')):>10}"
            f"{f1(rec and rec.get('bytes_per_event'), 2):>7}{f1(rec and rec['extra_rss_kb'], 0):>10}")
    lines.append("")
    for g in results["groups"]:
        if g["set"] == "heaptrack":
            r, h = fig(g, "rec"), fig(g, "heaptrack")
            if h and g["workload"] != "startup":
                lines.append(f"heaptrack {g['workload']:<16} heaptrack {f1(heaptrack_ns(results, g)[0])} ns/event, "
                             f"shim {f1(shim_net_ns(results, g['workload']))} ns/event, heaptrack wall ratio {ratio_s(h)}")
    d = results.get("drain") or {}
    if d.get("events_per_s"):
        lines.append(f"recorder drain rate: {d['events_per_s'] / 1e6:.1f} M events/s")
    for x in (results.get("stats_speed") or {}).get("logs", []):
        if x.get("events_per_cpu_s"):
            lines.append(f"shimlog stats, {x['name']}: {x['events_per_cpu_s'] / 1e6:.1f} M events per CPU second "
                         f"on one thread, max RSS {x['maxrss_kb'] / 1024:.0f} MiB; "
                         f"{(x.get('two_events_per_wall_s') or 0) / 1e6:.1f} M events per wall second by default")
    lines.append("")
    for t in results["targets"]:
        lines.append(f"[{verdict(t):^12}] {t['target']}: {t['figure']}")
    return "\n".join(lines)


def markdown(results):
    m = results["machine"]
    L = []
    w = L.append
    w("# Benchmarks\n")
    w("What the shim costs, against the bare allocators and against heaptrack. Generated by "
      "`make bench` (`bash bench/run.sh`, driver `bench/bench.py`); do not edit by hand. Raw runs "
      "and every figure are in `bench/results.json`.\n")
    w(f"- Date: {m['date']}; commit {m['git_commit']}; bench took {m['bench_seconds']} s")
    w(f"- Machine: {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}; load average "
      f"{' '.join(m['loadavg_start'])} at the start, {' '.join(m['loadavg_end'])} at the end "
      f"(the machine is shared: other jobs ran during the bench)")
    w(f"- glibc {m['glibc']}; Debian libjemalloc2 {m['debian_libjemalloc2']}, libmimalloc2.0 "
      f"{m['debian_libmimalloc2.0']}; {m['heaptrack']}; {m['gcc']}; {m['python3']}")
    vers = sorted({f"{g['backend']} {g.get('backend_version')}" for g in full_groups(results)
                   if g.get("backend_version")})
    w(f"- Allocators built into libshim.so (from the log headers): {', '.join(vers)}")
    w(f"- {results['rounds']} rounds: in each, every configuration of a workload runs once, in an order "
      f"rotated from round to round (A B C D, B C D A, ...), so each configuration has "
      f"{results['rounds']} runs paired with the bare run next to them in time. Figures are the median over "
      f"the pairs, with the min-max range.\n")

    w("## Targets\n")
    w("| target | measured | verdict |")
    w("|---|---|---|")
    for t in results["targets"]:
        w(f"| {t['target']} | {t['figure']} | **{verdict(t)}** |")
    w("")
    for t in results["targets"]:
        if t["why"]:
            w(f"- **{t['target']}: not met.** {t['why']}")
    w("")

    w("## Wall time, ratio to bare\n")
    w("Median ratio of wall time to the bare run of the same round (min-max over the pairs). "
      "Bare is glibc with no preload, or Debian's jemalloc/mimalloc preloaded on their own; the "
      "shim configurations forward to the allocator built into libshim.so.\n")
    w("| workload | backend | events/run | bare s | SHIM_TRACE=0 | recording | SHIM_TIMING=all |")
    w("|---|---|---|---|---|---|---|")
    for g in full_groups(results):
        w(f"| {g['workload']} | {g['backend']} | {g.get('events') or 'n/a'} | "
          f"{f1(g['figures']['bare_wall_s'], 3)} | {ratio_s(fig(g, 'off'))} | {ratio_s(fig(g, 'rec'))} | "
          f"{ratio_s(fig(g, 'rec_all'))} |")
    w("")

    w("## Per event\n")
    w("ns/event: median over the pairs of (configuration - bare) wall time, divided by the malloc-family "
      "events of the run (counted in its log). CPU ns/event: the same with user+system CPU time, "
      "which includes the recorder thread. Log B/event: log file size / events (before zstd in "
      "parentheses). Extra RSS: median max RSS minus bare's. The start-up row shows ms added per "
      "process instead.\n")
    w("rec - TRACE=0: recording's own cost, against the shim forwarding to the same allocator "
      "(for jemalloc and mimalloc the bare baseline is Debian's build of a different version, "
      "so this column isolates the shim better; a SHIM_TRACE=0 ratio below 1 there means the "
      "built-in allocator is faster than Debian's, not that the shim is free).\n")
    w("| workload | backend | TRACE=0 ns/ev | rec ns/ev (min-max) | rec - TRACE=0 ns/ev | rec CPU ns/ev | TIMING=all ns/ev | log B/ev (raw) | extra RSS KiB: TRACE=0 / rec |")
    w("|---|---|---|---|---|---|---|---|---|")
    for g in full_groups(results):
        off, rec, al = fig(g, "off"), fig(g, "rec"), fig(g, "rec_all")
        if g["workload"] == "startup":
            w(f"| startup (ms/process) | {g['backend']} | {f1(off and off['added_wall_s'] * 1e3, 2)} | "
              f"{f1(rec and rec['added_wall_s'] * 1e3, 2)} | | {f1(rec and rec['added_cpu_s'] * 1e3, 2)} | "
              f"{f1(al and al['added_wall_s'] * 1e3, 2)} | | {f1(off and off['extra_rss_kb'], 0)} / "
              f"{f1(rec and rec['extra_rss_kb'], 0)} |")
            continue
        rng = f"({f1(rec.get('ns_per_event_min'))} to {f1(rec.get('ns_per_event_max'))})" if rec else ""
        w(f"| {g['workload']} | {g['backend']} | {f1(off and off.get('ns_per_event'))} | "
          f"{f1(rec and rec.get('ns_per_event'))} {rng} | {f1(rec and rec.get('ns_per_event_over_off'))} | "
          f"{f1(rec and rec.get('cpu_ns_per_event'))} | "
          f"{f1(al and al.get('ns_per_event'))} | {f1(rec and rec.get('bytes_per_event'), 2)} "
          f"({f1(rec and rec.get('raw_bytes_per_event'), 2)}) | {f1(off and off['extra_rss_kb'], 0)} / "
          f"{f1(rec and rec['extra_rss_kb'], 0)} |")
    w("")

    w("## Against heaptrack\n")
    w("heaptrack records a backtrace per call, so it runs on smaller sizes (the `ht` sizes in "
      "bench/workloads.py), alternated with bare runs of the same size the same way, on glibc. "
      "Its figure is its own overhead (`heaptrack -o FILE cmd`: the preloaded library and its "
      "interpreter process), not its analysis.\n")
    w("Per event, start-up and exit excluded, which is what the >= 10x target is judged on. "
      "heaptrack: its runs at the size here and at three times that size, alternated with bare; "
      "(3x run - 1x run) / (events in between), less bare's own cost per event (full-size bare "
      "run vs this size's), so that heaptrack's start-up (hundreds of ms: a shell script, its "
      "interpreter process) cancels out; for gcc, which has no size knob, heaptrack's added time "
      "less what it adds to /bin/true. Shim: the full-size glibc recording runs above (many more "
      "events, far less noise), less what the shim adds to /bin/true. The wall ratio is "
      "heaptrack's run at the size here against bare.\n")
    w("The CPU columns are the same with user+system CPU time of all the processes and threads "
      "involved (heaptrack's interpreter process, the shim's recorder thread), i.e. what each "
      "tool costs the machine rather than the program's wall clock.\n")
    w("| workload | events/run (1x) | bare s | heaptrack wall ratio | heaptrack ns/ev | shim ns/ev | heaptrack / shim | heaptrack CPU ns/ev | shim CPU ns/ev | CPU heaptrack / shim | heaptrack output B/ev | shim log B/ev |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for g in results["groups"]:
        if g["set"] != "heaptrack":
            continue
        r, h = fig(g, "rec"), fig(g, "heaptrack")
        if g["workload"] == "startup":
            w(f"| startup (ms/process: heaptrack, shim) | | {f1(g['figures']['bare_wall_s'], 3)} | {ratio_s(h)} | "
              f"{f1(h and h['added_wall_s'] * 1e3, 1)} ms | {f1(r and r['added_wall_s'] * 1e3, 2)} ms | | |")
            continue
        rn, (hn, how) = shim_net_ns(results, g["workload"]), heaptrack_ns(results, g)
        rc, (hc, _) = shim_net_ns(results, g["workload"], "cpu_s"), heaptrack_ns(results, g, "cpu_s")

        def times(h_, r_):
            if r_ is None or h_ is None:
                return "n/a"
            return f"{h_ / r_:.0f}x" if r_ > 0 else "inf (shim's figure <= 0: noise)"
        w(f"| {g['workload']} | {g.get('events') or 'n/a'} | {f1(g['figures']['bare_wall_s'], 3)} | "
          f"{ratio_s(h)} | {f1(hn)}{' (' + how + ')' if how == 'net of /bin/true' else ''} | {f1(rn)} | "
          f"{times(hn, rn)} | {f1(hc)} | {f1(rc)} | {times(hc, rc)} | {f1(h and h.get('output_bytes_per_event'), 2)} | "
          f"{f1((fig(group(results, g['workload'], 'glibc'), 'rec') or {}).get('bytes_per_event'), 2)} |")
    w("")

    st = results.get("stats_speed") or {}
    w("## shimlog stats speed\n")
    w(f"`shimlog stats` on {len(st.get('logs', []))} logs, each analysed "
      f"{st.get('rounds')} times with `--one-thread` and {st.get('rounds')} times the default way "
      "(reading on a second thread), alternated. One thread: the rate is events / CPU seconds "
      "(user + system), the median of the runs, so it is the rate on one core. Default: events / "
      "wall seconds on this machine, and its CPU seconds (both threads). Max RSS is GNU time's. "
      "The rounds go over every log in turn; 'vs first': a log's one-thread rate against the first "
      "log's in the same round, the median of the rounds' ratios.\n")
    w("| log | made by | events | file | one thread: CPU s | M events / CPU s | vs first | max RSS | default: wall s | M events / wall s | CPU s | max RSS |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for x in st.get("logs", []):
        made = x["made_by"] if len(x.get("logs", [])) > 1 else f"`{x['made_by']}`"
        w(f"| {x['name']} | {made} | {x.get('events')} | {x['file_bytes'] / 2**20:.0f} MiB | "
          f"{f1(x.get('cpu_s'), 2)} | {f1((x.get('events_per_cpu_s') or 0) / 1e6)} | "
          f"{f1(x.get('rate_vs_first'), 2) if x.get('rate_vs_first') else '-'} | "
          f"{f1((x.get('maxrss_kb') or 0) / 1024, 0)} MiB | {f1(x.get('two_wall_s'), 2)} | "
          f"{f1((x.get('two_events_per_wall_s') or 0) / 1e6)} | {f1(x.get('two_cpu_s'), 2)} | "
          f"{f1((x.get('two_maxrss_kb') or 0) / 1024, 0)} MiB |")
    if st.get("logs"):
        w(f"\nCommands: `{st['logs'][0]['command']}` and `{st['logs'][0]['command_two']}` "
          "(and the same for each log).\n")
    elif st.get("skipped"):
        w(f"Skipped: {st['skipped']}\n")
    sg = st.get("stages") or {}
    if sg.get("ns_per_event"):
        n = sg["ns_per_event"]
        w("### Where the one-thread time goes\n")
        w("In each round, after the logs above, the reader's stages run on their own: the "
          "`zstdspeed` example decompresses every frame and does nothing else; `readspeed` runs the "
          "whole reader (decompression, decoding, the merge of the thread streams) and no analysis. "
          "Both run on the 8-thread synthetic log and on the same workload written by one thread "
          f"(`{sg.get('made_by')}`: one stream, so nearly no merge). Per event, CPU time: zstd = "
          "zstdspeed on the 8-thread log; decoding = readspeed minus zstdspeed on the one-thread log; "
          "the merge = the same difference on the 8-thread log, minus the decoding; the analysis = "
          "stats --one-thread minus readspeed on the 8-thread log. Each is the median of the rounds' "
          "figures, so they need not add up to the total exactly.\n")
        w("| stage | ns per event | share |")
        w("|---|---|---|")
        for k, name in (("zstd", "zstd decompression"), ("decode", "decoding the records"),
                        ("merge", "merging 8 thread streams"), ("analysis", "the analysis")):
            w(f"| {name} | {n[k]:.1f} | {n[k] / n['total']:.0%} |")
        w(f"| total (stats --one-thread) | {n['total']:.1f} | |")
        w("\nCommands: " + ", ".join(f"`{c}`" for c in sg.get("commands", [])) + ".\n")

    for line in ownalloc.markdown(results.get("ownalloc")):
        w(line)

    for line in crashsafe.markdown(results.get("crashsafe")):
        w(line)

    for line in report_export.markdown(results.get("report_export")):
        w(line)

    for line in backends.markdown(results.get("backends")):
        w(line)

    d = results.get("drain") or {}
    w("## Recorder drain rate\n")
    w("One thread runs the one-thread workload at full speed with `SHIM_ON_FULL=drop` (it never "
      "waits for the recorder); /proc/PID/task/TID/schedstat is sampled every 3 ms for the "
      "recorder thread's CPU time. Rate = events written to the log / recorder CPU seconds: "
      "what one recorder thread compresses and writes per second of its time. (The last few ms "
      "before exit are not sampled, which overstates the rate by at most a few percent.)\n")
    w(f"Command: `{d.get('command')}`\n")
    w("| run | events written | dropped | recorder CPU s | producer CPU s | wall s | M events / recorder CPU s |")
    w("|---|---|---|---|---|---|---|")
    for i, r in enumerate(d.get("runs", [])):
        w(f"| {i} | {r.get('events')} | {r.get('dropped')} | {f1(r.get('recorder_cpu_s'), 3)} | "
          f"{f1(r.get('main_cpu_s'), 3)} | {f1(r.get('wall_s'), 3)} | "
          f"{f1((r.get('events_per_recorder_cpu_s') or 0) / 1e6)} |")
    w("")
    if d.get("dropped_total"):
        when = sorted(t for r in d.get("runs", []) for t, _ in (r.get("drops_at_ms") or []) if t is not None)
        w(f"{d['dropped_total']} events were dropped in these runs; the dropped-count records are "
          f"stamped at {', '.join(f'{t:g}' for t in when)} ms after start.")
        if when and when[-1] < 100:
            w(" All of them at start-up, although the recorder drains several times faster than the "
              "thread produces: the recorder first calibrates its clock (a ~20 ms wait in "
              "shim/src/recorder_thread.rs at the time of writing) and drains nothing meanwhile, and a "
              "thread producing tens of millions of events per second fills the pool's buffers "
              "first. With the default SHIM_ON_FULL=block the thread waits there instead.")
        w("")

    cg = results.get("callgrind") or {}
    w("## Instructions per event (callgrind)\n")
    if cg.get("skipped"):
        w(f"Skipped: {cg['skipped']}\n")
    else:
        w(f"The one-thread workload under callgrind at {cg['sizes'][0]} and {cg['sizes'][1]} iterations; "
          "the difference divided by the difference in events is the marginal cost of one event "
          "(start-up and exit cancel out). Independent of the machine's load.\n")
        w("| configuration | calling thread instr/event | added over bare | recorder thread instr/event |")
        w("|---|---|---|---|")
        base = cg["configs"].get("bare", {}).get("calling_thread")
        for c in ("bare", "off", "rec", "rec_all"):
            x = cg["configs"].get(c)
            if x:
                w(f"| {TITLE.get(c, 'bare glibc')} | {x['calling_thread']:.1f} | "
                  f"{x['calling_thread'] - base:.1f} | {x['other_threads']:.1f} |")
        w("")
        for cfg, what in (("rec", "recording"), ("off", "SHIM_TRACE=0")):
            w(f"Where the {what} run's calling thread spends its instructions (self cost per event; "
              "code inlined from another file is listed under that file, then the function it was "
              "inlined into):\n")
            w(f"| where | instr/event {what} | instr/event bare |")
            w("|---|---|---|")
            for r in cg.get(f"{cfg}_breakdown", []):
                w(f"| `{r['where']}` | {r['per_event']:.1f} | {r['bare_per_event']:.1f} |")
            w("")

    c = results.get("clock_cost") or {}
    w("## Timestamp cost\n")
    if c.get("ns_per_pair"):
        w(f"`{c['command']}`: the one-thread loop without the shim, with the time-stamp counter "
          "read where the shim reads it; minimum over the repeats, ns per malloc+free pair (two events).\n")
        w("| stamps | ns per pair | added per pair |")
        w("|---|---|---|")
        base = c["ns_per_pair"].get("none", 0)
        desc = {"none": "none (bare loop)", "shim": "RDTSC before free, RDTSCP after malloc (the shim's)",
                "rdtsc": "RDTSC before free and after malloc", "lfence_rdtsc": "RDTSC before free, LFENCE+RDTSC after malloc"}
        for k, v in c["ns_per_pair"].items():
            w(f"| {desc.get(k, k)} | {v:.2f} | {v - base:.2f} |")
        w("")
    else:
        w("Not measured.\n")

    g_rec = group(results, "demo", "glibc")
    w("## The demo workload (issue 2's figures)\n")
    w("`workloads/demo.c` (the program `make demo` runs), built with `cc -O2 -pthread`, run with 4 "
      "threads and 100000 iterations each (`make demo` uses 250000; fewer keep the bench short, "
      "the per-event figures do not depend on it).\n")
    w("Wall-clock figures (median of 5 pairs, as in the tables above). This workload runs 4 "
      "threads on 2 shared cores and a third of its calls zero or copy up to 64 KiB, so its run "
      "time varies by more than the shim's cost here: negative figures are that noise.\n")
    w("| backend | events | SHIM_TRACE=0 ns/event | recording ns/event | SHIM_TIMING=all ns/event | log bytes/event |")
    w("|---|---|---|---|---|---|")
    for b in ("glibc", "jemalloc", "mimalloc"):
        g = group(results, "demo", b)
        if g:
            off, rec, al = fig(g, "off"), fig(g, "rec"), fig(g, "rec_all")
            w(f"| {b} | {g.get('events')} | {f1(off and off.get('ns_per_event'))} | "
              f"{f1(rec and rec.get('ns_per_event'))} | {f1(al and al.get('ns_per_event'))} | "
              f"{f1(rec and rec.get('bytes_per_event'), 2)} |")
    w("")
    cgd = results.get("callgrind_demo") or {}
    if cgd.get("configs"):
        c = cgd["configs"]
        b = c.get("bare", {}).get("calling_thread")
        w(f"Instruction counts, which the machine's load does not blur: the same program with one "
          f"thread (`{cgd.get('command', '').split(') ', 1)[-1]}`; with several, the allocator's paths and "
          f"so the counts vary from run to run under callgrind) at {cgd['sizes'][0]} and "
          f"{cgd['sizes'][1]} iterations, marginal per event: bare glibc executes {b:.0f} instructions "
          f"per event; SHIM_TRACE=0 adds {c['off']['calling_thread'] - b:.0f}, recording adds "
          f"{c['rec']['calling_thread'] - b:.0f} on the program's thread plus "
          f"{c['rec']['other_threads']:.0f} on the recorder thread.\n" if b and "off" in c and "rec" in c else "")
    if g_rec:
        w("Measured by `make bench`; the commands, for glibc:\n")
        w("```")
        for c in g_rec["configs"]:
            w(f"{c:8} {g_rec['commands'][c]}")
        w("```\n")

    w("## Commands\n")
    w("Everything runs from the repository root. Workloads are built by `bench/run.sh` with "
      "`cc -O2 -pthread -o bench/out/bin/NAME SRC`. Logs go to `bench/out/logs/` (TAG names the run) "
      "and are deleted once measured. Events per run are read from the logs' frame headers "
      "(record counts, less each thread's start and exit records: bench/logs.py); on glibc each "
      "workload's first recording run is also counted exactly with "
      f"`{next((g.get('count_method') for g in results['groups'] if g.get('count_method')), 'shimlog')}` "
      f"(largest difference from the estimate: {max((abs(g['events_exact'] - g['events_estimate_same_run']) for g in results['groups'] if 'events_exact' in g), default='n/a')} events). "
      "One round's commands per workload (jemalloc/mimalloc differ only in SHIM_BACKEND and the "
      "bare preload):\n")
    for wname, title in results["workloads"].items():
        w(f"### {wname}: {title}\n")
        w("```")
        for g in results["groups"]:
            if g["workload"] != wname:
                continue
            if g["set"] == "full" and g["backend"] != "glibc":
                w(f"bare     {g['commands']['bare']}    # {g['backend']}")
                continue
            for c in g["configs"]:
                if g["set"] == "heaptrack" and not c.startswith("heaptrack"):
                    continue
                w(f"{c:8} {g['commands'][c]}")
        w("```\n")
    outl = [(g, o) for g in results["groups"] for o in g["figures"].get("outliers", [])]
    if outl:
        w("## Outliers\n")
        w("Runs that took more than 10x their configuration's median (kept in the figures: the "
          "medians absorb them, the min-max ranges show them):\n")
        for g, o in outl:
            w(f"- {g['workload']}/{g['backend']} ({g['set']} set) {o['config']}, round {o['round']}: "
              f"{o['wall_s']:.2f} s wall, {o['cpu_s']:.2f} s CPU (median {o['median_wall_s']:.3f} s)")
        w("")
    probs = {}
    for g in results["groups"]:
        for p in g.get("problems", []):
            cfg, _, what = p.partition(": ")
            probs.setdefault(what, []).append(f"{g['workload']}/{g['backend']}/{cfg}")
    if probs:
        w("## Problems seen during the bench\n")
        w("Runs that completed (and were timed) but whose output or log was not what it should be "
          "(in a bare run, that is the allocator's own doing, not the shim's):\n")
        for what, where in probs.items():
            w(f"- {what}: {', '.join(where)}")
        w("")
    if results.get("fidelity"):
        import fidelity
        w(fidelity.markdown(results["fidelity"]))
    if results.get("skipped"):
        w("## Skipped\n")
        for s in results["skipped"]:
            w(f"- {s}")
        w("")
    return "\n".join(L) + "\n"
