"""From raw runs to the figures: ratios to bare, ns added per event, bytes per event, RSS.

Runs of one group (a workload at one size on one backend) come in rounds; in each round
every configuration ran once, in an order rotated from round to round, so the i-th run of a
configuration is paired with the i-th bare run, which ran next to it in time."""
import statistics


def median(xs):
    return statistics.median(xs) if xs else None


def pair_up(runs, config):
    """[(bare run, config run)] by round, for rounds where both succeeded."""
    by_round = {}
    for r in runs:
        if r["ok"]:
            by_round.setdefault(r["round"], {})[r["config"]] = r
    return [(v["bare"], v[config]) for _, v in sorted(by_round.items())
            if "bare" in v and config in v]


def config_figures(runs, config, events):
    """Figures of one configuration against bare within a group."""
    pairs = pair_up(runs, config)
    if not pairs:
        return None
    ratios = [c["wall_s"] / b["wall_s"] for b, c in pairs]
    cpu_ratios = [c["cpu_s"] / b["cpu_s"] for b, c in pairs if b["cpu_s"] > 0]
    d_wall = [c["wall_s"] - b["wall_s"] for b, c in pairs]
    d_cpu = [c["cpu_s"] - b["cpu_s"] for b, c in pairs]
    f = {
        "pairs": len(pairs),
        "wall_s": median([c["wall_s"] for _, c in pairs]),
        "ratio": median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "cpu_ratio": median(cpu_ratios),
        "added_wall_s": median(d_wall),
        "added_cpu_s": median(d_cpu),
    }
    rss_c = [c["maxrss_kb"] for _, c in pairs if c["maxrss_kb"] is not None]
    rss_b = [b["maxrss_kb"] for b, _ in pairs if b["maxrss_kb"] is not None]
    f["maxrss_kb"] = median(rss_c)
    f["extra_rss_kb"] = median(rss_c) - median(rss_b) if rss_c and rss_b else None
    if events:
        f["ns_per_event"] = f["added_wall_s"] / events * 1e9
        f["cpu_ns_per_event"] = f["added_cpu_s"] / events * 1e9
        ns = sorted(d / events * 1e9 for d in d_wall)
        f["ns_per_event_min"], f["ns_per_event_max"] = ns[0], ns[-1]
    logs = [c["log_bytes"] for _, c in pairs if c.get("log_bytes") is not None]
    if logs and events:
        f["log_bytes"] = median(logs)
        f["bytes_per_event"] = f["log_bytes"] / events
        raw = [c["raw_bytes"] for _, c in pairs if c.get("raw_bytes")]
        if raw:
            f["raw_bytes_per_event"] = median(raw) / events
    ht = [c["ht_bytes"] for _, c in pairs if c.get("ht_bytes") is not None]
    if ht and events:
        f["output_bytes_per_event"] = median(ht) / events
    return f


def group_figures(group):
    runs = group["runs"]
    bare = [r for r in runs if r["config"] == "bare" and r["ok"]]
    out = {
        "bare_wall_s": median([r["wall_s"] for r in bare]),
        "bare_wall_min": min((r["wall_s"] for r in bare), default=None),
        "bare_wall_max": max((r["wall_s"] for r in bare), default=None),
        "bare_cpu_s": median([r["cpu_s"] for r in bare]),
        "bare_maxrss_kb": median([r["maxrss_kb"] for r in bare if r["maxrss_kb"] is not None]),
        "configs": {},
    }
    for cfg in group["configs"]:
        if cfg != "bare" and not cfg.endswith("_3x"):
            f = config_figures(runs, cfg, group.get("events"))
            if f:
                out["configs"][cfg] = f
    if "rec" in out["configs"] and "off" in out["configs"] and group.get("events"):
        # recording's own cost, against the shim forwarding to the same allocator
        by_round = {}
        for r in runs:
            if r["ok"]:
                by_round.setdefault(r["round"], {})[r["config"]] = r
        d = [v["rec"]["wall_s"] - v["off"]["wall_s"] for v in by_round.values() if "rec" in v and "off" in v]
        if d:
            out["configs"]["rec"]["ns_per_event_over_off"] = median(d) / group["events"] * 1e9
    out["outliers"] = outliers(runs)
    return out


def outliers(runs, factor=10.0):
    """Runs that took more than `factor` times their configuration's median wall time."""
    found = []
    for cfg in sorted({r["config"] for r in runs}):
        walls = [r["wall_s"] for r in runs if r["config"] == cfg and r["ok"]]
        m = median(walls)
        for r in runs:
            if r["config"] == cfg and r["ok"] and m and r["wall_s"] > factor * m:
                found.append({"config": cfg, "round": r.get("round"), "wall_s": r["wall_s"],
                              "cpu_s": r["cpu_s"], "median_wall_s": m})
    return found


def marginal_ns(runs, small, big, events_small, events_big, key="wall_s"):
    """Median over the rounds of (big - small) wall time / (events_big - events_small): the cost
    of one more event in configuration `small`/`big` (the same one at two sizes), with start-up
    and exit cancelled out."""
    by_round = {}
    for r in runs:
        if r["ok"]:
            by_round.setdefault(r["round"], {})[r["config"]] = r
    d = [(v[big][key] - v[small][key]) for v in by_round.values() if small in v and big in v]
    if not d or not events_small or not events_big or events_big == events_small:
        return None
    return median(d) / (events_big - events_small) * 1e9
