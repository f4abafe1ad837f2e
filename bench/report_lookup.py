"""For the bench's write-ups (report.py, report_targets.py): a group's figures looked up in
the results dict bench.py builds, their formatting, and the per-event costs derived from
them (net of start-up, heaptrack's marginal cost)."""


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
