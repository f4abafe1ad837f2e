"""The bench's targets, each met or not, with its figure and, when not met, why: computed
from the results dict bench.py builds (report.targets), shown by report.py."""

import ownalloc
from report_lookup import cg_cfg, f1, fig, full_groups, group, heaptrack_ns, ratio_s, shim_breakdown, shim_net_ns

MICRO = ("single", "prodcons", "realloc_aligned", "demo")


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
