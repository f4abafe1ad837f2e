"use strict";
// Draws the report from the JSON embedded in the page (see data.rs): sections, tables and
// SVG charts. Every number of `stats --json` shown carries data-field (its path in that
// document) and data-raw (its exact value), which the tests compare with stats --json.
(function () {
  const D = JSON.parse(document.getElementById("shimlog-data").textContent);
  const S = D.stats;
  const main = document.getElementById("main");

  // ---- units ----
  function sig3(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }
  function bytes(n) {
    if (n === null || n === undefined) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = Number(n), i = 0;
    if (Math.abs(v) < 1024) return v + " B";
    while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return sig3(v) + " " + u[i];
  }
  function ns(n) {
    if (n === null || n === undefined) return "–";
    const v = Number(n);
    if (v < 1e3) return (Number.isInteger(v) ? v : v.toFixed(1)) + " ns";
    if (v < 1e6) return sig3(v / 1e3) + " µs";
    if (v < 1e9) return sig3(v / 1e6) + " ms";
    return sig3(v / 1e9) + " s";
  }
  function count(n) {
    if (n === null || n === undefined) return "–";
    return Number(n).toLocaleString("en-US", { maximumFractionDigits: 2 });
  }
  function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(x < 0.001 && x > 0 ? 3 : 1) + " %"; }
  function ratio(x) { return x === null || x === undefined ? "–" : Number(x).toFixed(2) + "x"; }
  function text(s) { return s === null || s === undefined ? "–" : String(s); }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  function when(unixNs) { return unixNs ? new Date(unixNs / 1e6).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : "–"; }
  function get(o, path) {
    for (const k of path.split(".")) { if (o === null || o === undefined) return undefined; o = o[k]; }
    return o;
  }

  // ---- bound values and tables ----
  // A value of the stats document at `path` (relative to `base`, a path prefix).
  function raw(v) { return typeof v === "object" ? JSON.stringify(v) : String(v); }
  function val(path, fmt) {
    const v = get(S, path);
    if (v === undefined) return `<span class="none">-</span>`; // not in this log (no RSS samples, say)
    return `<span data-field="${esc(path)}" data-raw="${esc(raw(v))}">${esc((fmt || count)(v))}</span>`;
  }
  // A table cell: {v: raw value, f: formatter, field: stats path or none, num: right-aligned}.
  function c(v, f, field) { return { v: v, f: f || text, field: field }; }
  function table(cols, rows, cls) {
    let h = `<table class="sortable ${cls || ""}"><thead><tr>`;
    for (const col of cols) h += `<th class="${col.num ? "n" : ""}">${esc(col.h)}</th>`;
    h += "</tr></thead><tbody>";
    for (const r of rows) {
      h += "<tr>";
      r.forEach((x, i) => {
        const field = x.field ? ` data-field="${esc(x.field)}"` : "";
        h += `<td class="${cols[i].num ? "n" : ""}"${field} data-raw="${esc(raw(x.v))}">${esc(x.f(x.v))}</td>`;
      });
      h += "</tr>";
    }
    return h + "</tbody></table>";
  }
  function sortable(root) {
    for (const t of root.querySelectorAll("table.sortable")) {
      t.querySelectorAll("th").forEach((th, i) => th.addEventListener("click", () => {
        const dir = th.dataset.dir === "desc" ? "asc" : "desc";
        t.querySelectorAll("th").forEach(x => delete x.dataset.dir);
        th.dataset.dir = dir;
        const body = t.tBodies[0];
        const rows = Array.from(body.rows);
        const key = r => { const s = r.cells[i].dataset.raw; const n = Number(s); return s !== "" && !isNaN(n) ? n : s; };
        rows.sort((a, b) => { const x = key(a), y = key(b); const o = x < y ? -1 : x > y ? 1 : 0; return dir === "asc" ? o : -o; });
        rows.forEach(r => body.appendChild(r));
      }));
    }
  }
  function cards(items) {
    return `<div class="cards">${items.map(([k, v]) => `<div class="card"><div class="k">${esc(k)}</div><div class="v">${v}</div></div>`).join("")}</div>`;
  }

  // ---- charts (SVG) ----
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) { hi = lo + 1; }
    const span = hi - lo, step0 = span / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
    const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => span / s <= n) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
    return out;
  }
  function logTicks(lo, hi) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); Math.pow(10, e) <= hi * 1.0001; e++) if (Math.pow(10, e) >= lo * 0.9999) out.push(Math.pow(10, e));
    return out.length ? out : [lo, hi];
  }
  // series: [{name, pts: [[x, y]...], dots}]; o: {xfmt, yfmt, logX, logY, yMin, yMax, title, step}
  function lineChart(series, o) {
    const W = o.w || 620, H = o.h || 260, L = 70, R = 12, T = 22, B = 34;
    const all = series.flatMap(s => s.pts).filter(p => p[1] !== null && p[1] !== undefined && (!o.logX || p[0] > 0) && (!o.logY || p[1] > 0));
    if (!all.length) return `<p class="note">${esc(o.title || "")}: nothing to draw.</p>`;
    let x0 = Math.min(...all.map(p => p[0])), x1 = Math.max(...all.map(p => p[0]));
    let y0 = o.yMin !== undefined ? o.yMin : Math.min(0, ...all.map(p => p[1]));
    let y1 = o.yMax !== undefined ? o.yMax : Math.max(...all.map(p => p[1]));
    if (o.logY) { y0 = Math.min(...all.map(p => p[1])); }
    if (x1 === x0) x1 = x0 + (o.logX ? x0 : 1);
    if (y1 === y0) y1 = y0 + (o.logY ? y0 : 1);
    const fx = o.logX ? v => Math.log10(v) : v => v, fy = o.logY ? v => Math.log10(v) : v => v;
    const X = v => L + (fx(v) - fx(x0)) / (fx(x1) - fx(x0)) * (W - L - R);
    const Y = v => H - B - (fy(v) - fy(y0)) / (fy(y1) - fy(y0)) * (H - T - B);
    let g = "";
    const xt = o.logX ? logTicks(x0, x1) : niceTicks(x0, x1, 6), yt = o.logY ? logTicks(y0, y1) : niceTicks(y0, y1, 5);
    for (const v of yt) g += `<line class="grid" x1="${L}" x2="${W - R}" y1="${Y(v)}" y2="${Y(v)}"/><text x="${L - 6}" y="${Y(v) + 4}" text-anchor="end">${esc((o.yfmt || count)(v))}</text>`;
    for (const v of xt) g += `<line class="grid" y1="${T}" y2="${H - B}" x1="${X(v)}" x2="${X(v)}"/><text x="${X(v)}" y="${H - B + 16}" text-anchor="middle">${esc((o.xfmt || count)(v))}</text>`;
    g += `<line class="axis" x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}"/><line class="axis" x1="${L}" x2="${L}" y1="${T}" y2="${H - B}"/>`;
    series.forEach((s, i) => {
      const pts = s.pts.filter(p => p[1] !== null && p[1] !== undefined && (!o.logX || p[0] > 0) && (!o.logY || p[1] > 0));
      const k = `s${(s.color !== undefined ? s.color : i) % 6}`;
      if (s.dots) {
        for (const p of pts) g += `<circle class="${k}" cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="3"><title>${esc(s.label ? s.label(p) : "")}</title></circle>`;
      } else if (pts.length) {
        let d = "";
        pts.forEach((p, j) => {
          if (j && o.step) d += `H${X(p[0]).toFixed(1)}`;
          d += `${j ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`;
        });
        g += `<path class="line ${k}" d="${d}"/>`;
      }
      g += `<rect class="${k}" x="${L + 8 + 130 * i}" y="4" width="10" height="10"/><text x="${L + 22 + 130 * i}" y="13">${esc(s.name)}</text>`;
    });
    return `<figure><svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img">${g}</svg><figcaption>${esc(o.title || "")}</figcaption></figure>`;
  }
  // Horizontal bars: rows [{label, v, field}]
  function barChart(rows, o) {
    const W = o.w || 460, bh = 20, L = 150, R = 90, H = rows.length * (bh + 6) + 10;
    const max = Math.max(...rows.map(r => r.v || 0), 1e-12);
    let g = "";
    rows.forEach((r, i) => {
      const y = 5 + i * (bh + 6), w = Math.max(0, (r.v || 0) / max * (W - L - R));
      g += `<text x="${L - 6}" y="${y + 14}" text-anchor="end">${esc(r.label)}</text><rect class="s${(r.color !== undefined ? r.color : 0) % 6}" x="${L}" y="${y}" width="${w.toFixed(1)}" height="${bh}"/><text x="${L + w + 4}" y="${y + 14}">${esc((o.fmt || count)(r.v))}</text>`;
    });
    return `<figure><svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img">${g}</svg><figcaption>${esc(o.title || "")}</figcaption></figure>`;
  }

  // ---- sections ----
  const parts = [];
  function section(id, title, html) { parts.push({ id, title, html }); }
  // `report BASE --vs CANDIDATE`: compare's page (vs.rs), drawn from compare's document.
  if (D.compare) { drawCompare(); finish(); return; }

  const procs = S.logs ? S.logs.map((l, i) => ({ s: l, base: `logs.${i}` })) : [{ s: S, base: "" }];
  const p = (base, path) => (base ? base + "." : "") + path;

  // The program and the capture.
  {
    let h = cards([
      ["processes", val("processes")], ["events", val("events")], ["duration", val("duration_ns", ns)],
      ["threads", val("threads")], ["peak live", val("peak_live_bytes", bytes)], ["peak live blocks", val("peak_live_blocks")],
      ["live at end", val("live_at_end.bytes", bytes)], ["dropped events", val("dropped.events")],
      ["unknown frees", val("unknown_frees")], ["backend", val("backend", text)],
    ]);
    for (const { s, base } of procs) {
      const pr = s.process || {};
      h += `<h3>${esc(pr.program || pr.exe || "")} (pid ${val(p(base, "process.pid"), text)})</h3>`;
      h += table([{ h: "" }, { h: "" }], [
        [c("log"), c(s.log, text, p(base, "log"))],
        [c("command line"), c((pr.cmdline || []).join(" "))],
        [c("parent"), c(pr.ppid, text, p(base, "process.ppid"))],
        [c("backend"), c(s.backend + " " + (pr.backend_version || ""))],
        [c("started"), c(pr.start_unix_ns, when, p(base, "process.start_unix_ns"))],
        [c("timing, on full, clock"), c(`${pr.timing}, ${pr.on_full}, ${pr.clock}`)],
        [c("events"), c(s.events, count, p(base, "events"))],
        [c("duration"), c(s.duration_ns, ns, p(base, "duration_ns"))],
        [c("frames, file size"), c(`${count(s.read.frames)} frames, ${bytes(s.read.file_bytes)}`)],
        [c("ended cleanly"), c(s.read.clean_end ? "yes" : "no (no End record: the process did not close its log)")],
        [c("read issues"), c(s.read.issues.length ? s.read.issues.map(i => i.message).join("; ") : "none")],
        [c("own allocators"), c((pr.own_allocators || []).map(a => `${a.family} ${a.version} (${a.mode}, ${a.file})`).join("; ") || "none")],
      ]);
      if (s.watch) {
        h += `<h3>capture windows (this log: window ${esc(s.watch.window)})</h3>`;
        h += s.watch.windows.length ? table([{ h: "window", num: 1 }, { h: "start", num: 1 }, { h: "length", num: 1 }, { h: "started" }, { h: "ended" }],
          s.watch.windows.map(w => [c(w.number, count), c(w.start_ns, ns), c(w.length_ns, ns), c(w.started), c(w.ended)])) : `<p class="note">no windows listed in this log (a window's own log: see the watch log)</p>`;
      }
      if (s.dropped.per_thread.length) {
        h += `<h3>dropped events</h3>` + table([{ h: "tid", num: 1 }, { h: "events", num: 1 }],
          s.dropped.per_thread.map((d, i) => [c(d.tid, text), c(d.events, count, p(base, `dropped.per_thread.${i}.events`))]));
      }
    }
    const ops = Object.keys(S.ops).filter(o => S.ops[o] > 0);
    h += `<h3>calls</h3>` + table([{ h: "function" }, { h: "calls", num: 1 }, { h: "bytes requested", num: 1 }, { h: "failed", num: 1 }],
      ops.map(o => [c(o), c(S.ops[o], count, `ops.${o}`), c(S.bytes[o] || 0, bytes, S.bytes[o] !== undefined ? `bytes.${o}` : undefined),
        c((S.failed || {})[o] || 0, count)]));
    section("sec-program", "Program and capture", h);
  }

  // Memory over time.
  {
    let h = cards([["peak RSS", val("memory.peak_rss_bytes", bytes)], ["peak live", val("peak_live_bytes", bytes)],
      ["RSS / live at peak", val("memory.rss_at_peak.rss_per_live", ratio)]]);
    const first = D.memory.length ? D.memory[0].offset_ns : 0;
    for (const m of D.memory) {
      const t = pt => (pt[0] - first) / 1e9;
      const series = [{ name: "live bytes", color: 0, pts: m.points.map(pt => [t(pt), pt[2]]) }];
      if (m.samples_from === "rss") series.unshift({ name: "RSS", pts: m.points.map(pt => [t(pt), pt[1]]), color: 1 });
      h += lineChart(series, { title: `${m.exe || "all processes"}${m.pid ? " (pid " + m.pid + ")" : ""}: memory over time (s)`, yfmt: bytes, xfmt: v => sig3(v) + " s", w: 900 });
    }
    for (const { s, base } of procs) {
      const st = s.watch && s.watch.allocator_stats;
      if (st && Object.keys(st).length) {
        h += `<h3>the allocator's own statistics (pid ${esc((s.process || {}).pid)}, sampled every second)</h3>` + table(
          [{ h: "statistic" }, { h: "last", num: 1 }, { h: "min", num: 1 }, { h: "max", num: 1 }, { h: "samples", num: 1 }],
          Object.keys(st).map(k => [c(k), c(st[k].last, k === "page_faults" ? count : bytes, p(base, `watch.allocator_stats.${k}.last`)),
            c(st[k].min, k === "page_faults" ? count : bytes), c(st[k].max, k === "page_faults" ? count : bytes, p(base, `watch.allocator_stats.${k}.max`)), c(st[k].samples, count)]));
      }
    }
    section("sec-memory", "Memory over time", h);
  }

  // Request sizes and lifetimes.
  {
    const sz = S.sizes.buckets;
    let h = `<div class="charts">` + barChart(sz.map((b, i) => ({ label: `${bytes(b.from)} – ${bytes(b.to)}`, v: b.requests })), { title: "requests by size (power-of-two buckets)", w: 520 }) +
      barChart(sz.map(b => ({ label: `${bytes(b.from)} – ${bytes(b.to)}`, v: b.bytes, color: 1 })), { title: "bytes requested by size", fmt: bytes, w: 520 }) + `</div>`;
    h += table([{ h: "from", num: 1 }, { h: "to", num: 1 }, { h: "requests", num: 1 }, { h: "bytes", num: 1 }],
      sz.map((b, i) => [c(b.from, bytes), c(b.to, bytes), c(b.requests, count, `sizes.buckets.${i}.requests`), c(b.bytes, bytes, `sizes.buckets.${i}.bytes`)]));
    h += `<h3>most frequent sizes (${val("sizes.distinct")} distinct)</h3>` + table([{ h: "size", num: 1 }, { h: "requests", num: 1 }],
      S.sizes.top.map((t, i) => [c(t.size, count, `sizes.top.${i}.size`), c(t.requests, count, `sizes.top.${i}.requests`)]));
    const L = S.lifetimes;
    h += `<h3>lifetimes</h3>` + cards([["freed blocks", val("lifetimes.freed_blocks")], ["never freed", val("lifetimes.never_freed_blocks")],
      ["p50", val("lifetimes.p50_ns", ns)], ["p90", val("lifetimes.p90_ns", ns)], ["p99", val("lifetimes.p99_ns", ns)], ["max", val("lifetimes.max_ns", ns)],
      ["freed within 1 µs", val("lifetimes.share_within_1us", pct)]]);
    h += barChart(L.buckets.map(b => ({ label: `${ns(b.from_ns)} – ${b.below_ns === null ? "∞" : ns(b.below_ns)}`, v: b.blocks, color: 2 })), { title: "freed blocks by time alive", w: 620 });
    h += `<h3>size-class waste (slop) for each backend</h3>` + table(
      [{ h: "backend" }, { h: "version" }, { h: "requested", num: 1 }, { h: "slop", num: 1 }, { h: "slop share", num: 1 }, { h: "slop at peak", num: 1 }],
      Object.keys(S.slop).map(b => { const x = S.slop[b]; return [c(b), c(x.version), c(x.requested_bytes, bytes, `slop.${b}.requested_bytes`),
        c(x.slop_bytes, bytes, `slop.${b}.slop_bytes`), c(x.slop_share, pct, `slop.${b}.slop_share`), c(x.at_peak.slop_bytes, bytes, `slop.${b}.at_peak.slop_bytes`)]; }));
    section("sec-sizes", "Request sizes and lifetimes", h);
  }

  // Time inside the allocator.
  {
    const lat = S.latency;
    let h = cards([["timed calls", val("latency.timed_calls")]]);
    const ops = Object.keys(D.latency_cdf);
    if (ops.length) {
      h += lineChart(ops.map(o => ({ name: o, pts: D.latency_cdf[o] })), { title: "time inside the allocator, CDF per function (log scale)", logX: true, xfmt: ns, yfmt: pct, yMin: 0, yMax: 1, step: true, w: 900 });
      h += table([{ h: "function" }, { h: "timed", num: 1 }, { h: "p50", num: 1 }, { h: "p90", num: 1 }, { h: "p99", num: 1 }, { h: "p99.9", num: 1 }, { h: "max", num: 1 }, { h: "mean", num: 1 }],
        Object.keys(lat.per_op).map(o => { const x = lat.per_op[o], b = `latency.per_op.${o}`; return [c(o), c(x.timed_calls, count, b + ".timed_calls"),
          c(x.p50_ns, ns, b + ".p50_ns"), c(x.p90_ns, ns, b + ".p90_ns"), c(x.p99_ns, ns, b + ".p99_ns"), c(x.p999_ns, ns, b + ".p999_ns"), c(x.max_ns, ns, b + ".max_ns"), c(x.mean_ns, ns, b + ".mean_ns")]; }));
      h += `<h3>the slowest calls</h3>` + lineChart([{ name: "slowest calls", dots: true, pts: lat.slowest.map(s => [s.ts_ns / 1e9, s.backend_ns]), label: pt => `${ns(pt[1])} at ${sig3(pt[0])} s` }],
        { title: "the slowest calls on the timeline (s; log scale)", logY: true, yfmt: ns, xfmt: v => sig3(v) + " s", w: 900 });
      h += table([{ h: "time inside", num: 1 }, { h: "at", num: 1 }, { h: "pid", num: 1 }, { h: "tid", num: 1 }, { h: "function" }, { h: "size", num: 1 }, { h: "freed", num: 1 }],
        lat.slowest.map((s, i) => [c(s.backend_ns, ns, `latency.slowest.${i}.backend_ns`), c(s.ts_ns, ns, `latency.slowest.${i}.ts_ns`), c(s.pid, text), c(s.tid, text), c(s.op), c(s.size, bytes), c(s.freed_bytes, bytes)]));
    } else {
      h += `<p class="note">no call in this log carries a backend time (SHIM_TIMING=none)</p>`;
    }
    section("sec-latency", "Time inside the allocator", h);
  }

  // Threads.
  {
    const x = S.cross_thread_frees;
    let h = cards([["threads", val("threads")], ["cross-thread frees", val("cross_thread_frees.count")], ["of frees", val("cross_thread_frees.share", pct)],
      ["thread pairs", val("cross_thread_frees.pairs")], ["free bursts", val("free_bursts.count")]]);
    h += table([{ h: "pid", num: 1 }, { h: "tid", num: 1 }, { h: "allocs", num: 1 }, { h: "frees", num: 1 }, { h: "bytes allocated", num: 1 }, { h: "cross-thread frees", num: 1 }, { h: "dropped", num: 1 }, { h: "first", num: 1 }, { h: "last", num: 1 }],
      S.per_thread.map((t, i) => { const b = `per_thread.${i}`; return [c(t.pid, text), c(t.tid, text, b + ".tid"), c(t.allocs, count, b + ".allocs"), c(t.frees, count, b + ".frees"),
        c(t.bytes_allocated, bytes, b + ".bytes_allocated"), c(t.cross_thread_frees, count, b + ".cross_thread_frees"), c(t.dropped_events, count), c(t.first_ns, ns), c(t.last_ns, ns)]; }));
    // The matrix: the busiest threads by cross-thread frees, made (rows) and freed (columns).
    const pairs = D.thread_pairs;
    if (pairs.length) {
      const w = new Map();
      for (const q of pairs) { const a = q.pid + "/" + q.alloc_tid, f = q.pid + "/" + q.free_tid; w.set(a, (w.get(a) || 0) + q.count); w.set(f, (w.get(f) || 0) + q.count); }
      const ts = Array.from(w.keys()).sort((a, b) => w.get(b) - w.get(a)).slice(0, 16).sort();
      const at = new Map(pairs.map(q => [q.pid + "/" + q.alloc_tid + ">" + q.pid + "/" + q.free_tid, q.count]));
      const max = Math.max(...pairs.map(q => q.count));
      const name = k => { const [pid, tid] = k.split("/"); return procs.length > 1 ? `${pid}:${tid}` : tid; };
      h += `<h3>cross-thread frees: rows made the blocks, columns freed them${w.size > 16 ? " (the 16 busiest threads)" : ""}</h3><table class="matrix"><thead><tr><th>made \\ freed</th>`;
      for (const f of ts) h += `<th class="n">${esc(name(f))}</th>`;
      h += "</tr></thead><tbody>";
      for (const a of ts) {
        h += `<tr><th>${esc(name(a))}</th>`;
        for (const f of ts) {
          const n = at.get(a + ">" + f) || 0;
          h += `<td class="n" data-raw="${n}" style="background: rgba(var(--heat), ${n ? (0.12 + 0.78 * n / max).toFixed(3) : 0})">${n ? count(n) : ""}</td>`;
        }
        h += "</tr>";
      }
      h += "</tbody></table>";
    } else {
      h += `<p class="note">no block was freed by another thread than the one that made it</p>`;
    }
    section("sec-threads", "Threads", h);
  }

  // Call sites.
  {
    let h = "";
    procs.forEach(({ s, base }, i) => {
      const st = s.sites;
      if (!st) return;
      const pr = s.process || {};
      const q = path => p(base, "sites." + path);
      h += `<h3>${esc(pr.program || pr.exe || "")} (pid ${esc(pr.pid)}): SHIM_STACKS=${esc(st.mode)}, ${val(q("stacks"))} stacks</h3>`;
      if (st.estimated) h += `<p class="note">sampled every ${esc(bytes(st.sample_bytes))} on average: the totals are estimates (each sample weighted 1 / (1 - exp(-size / mean)))</p>`;
      if (pr.sampled_only) h += `<p class="note">a sampled-only log (SHIM_RECORD=sample): only the sampled allocations, their frees and the slow calls were recorded</p>`;
      h += cards([["allocated", val(q("total_alloc_bytes"), bytes)], ["allocations", val(q("total_alloc_calls"))],
        ["live at the peak", val(q("total_live_at_peak_bytes"), bytes)], ["never freed", val(q("total_leaked_bytes"), bytes)]]);
      const where = r => r.location ? `${r.function} (${r.location})` : r.function;
      const lists = [["by_bytes", "by bytes allocated", "alloc_bytes", bytes, "alloc_calls", count],
        ["live_at_peak", "live at the peak", "live_at_peak_bytes", bytes, "live_at_peak_objects", count],
        ["leaked", "never freed", "leaked_bytes", bytes, "leaked_objects", count],
        ["slow", "slow calls", "slow_ns", ns, "slow_calls", count]];
      for (const [list, title, f1, fmt1, f2, fmt2] of lists) {
        const rows = st[list] || [];
        if (!rows.length) continue;
        h += `<h3>${esc(title)}</h3>` + table([{ h: "site" }, { h: f1.replace(/_/g, " "), num: 1 }, { h: f2.replace(/_/g, " "), num: 1 }, { h: "stack" }],
          rows.map((r, j) => [c(where(r)), c(r[f1], fmt1, q(`${list}.${j}.${f1}`)), c(r[f2], fmt2, q(`${list}.${j}.${f2}`)), c((r.stack || []).slice(0, 6).join(" < "))]));
      }
      if ((st.issues || []).length) h += `<p class="note">${esc(st.issues.join("; "))}</p>`;
      for (const f of D.flames.filter(f => f.section === i)) {
        h += `<figure class="flame"><img alt="flame graph by ${esc(f.by)}" src="data:image/svg+xml;charset=utf-8,${encodeURIComponent(f.svg)}"><figcaption>flame graph by ${esc(f.by)} (\`shimlog flamegraph\` writes it on its own, interactive)</figcaption></figure>`;
      }
    });
    section("sec-sites", "Call sites", h || `<p class="note" id="no-stacks">no call stacks in this log: call sites and a flame graph need a log recorded with call stacks (SHIM_STACKS=sample or all, or SHIM_RECORD=sample)</p>`);
  }

  // The replay.
  {
    let h = "";
    if (!D.replay_asked) {
      h = `<p class="note">not replayed: <code>shimlog report LOG --replay</code> replays the log against every backend and compares them here</p>`;
    }
    for (const r of D.replays) {
      const bs = r.backends.filter(b => !b.error);
      h += `<h3>${esc(r.log)}: replayed against ${bs.map(b => esc(b.backend)).join(", ")}</h3>`;
      for (const b of r.backends.filter(b => b.error)) h += `<p class="err">${esc(b.backend)}: ${esc(b.error)}</p>`;
      const all = b => b.latency.all || {};
      const bar = (title, f, fmt) => barChart(bs.map((b, i) => ({ label: b.backend, v: f(b), color: i })), { title, fmt });
      h += `<div class="charts">` + bar("wall time", b => b.wall_ns, ns) + bar("CPU time (user + system)", b => b.cpu_user_ns + b.cpu_sys_ns, ns) +
        bar("latency p50", b => all(b).p50_ns, ns) + bar("latency p99", b => all(b).p99_ns, ns) + bar("latency p99.9", b => all(b).p99_9_ns, ns) +
        bar("peak RSS", b => b.memory.peak_rss_bytes, bytes) + bar("fragmentation (peak RSS / peak live)", b => b.memory.fragmentation, ratio) +
        bar("slop (usable - requested)", b => b.slop_bytes_total, bytes) + `</div>`;
      h += table([{ h: "backend" }, { h: "wall", num: 1 }, { h: "CPU", num: 1 }, { h: "p50", num: 1 }, { h: "p99", num: 1 }, { h: "p99.9", num: 1 }, { h: "max", num: 1 }, { h: "peak RSS", num: 1 }, { h: "fragmentation", num: 1 }, { h: "slop", num: 1 }, { h: "minor faults", num: 1 }],
        bs.map(b => [c(b.backend), c(b.wall_ns, ns), c(b.cpu_user_ns + b.cpu_sys_ns, ns), c(all(b).p50_ns, ns), c(all(b).p99_ns, ns), c(all(b).p99_9_ns, ns), c(all(b).max_ns, ns),
          c(b.memory.peak_rss_bytes, bytes), c(b.memory.fragmentation, ratio), c(b.slop_bytes_total, bytes), c(b.minor_faults, count)]), "replay-table");
      // The replay keeps percentiles, not whole histograms: each CDF is drawn through them.
      h += `<div class="charts">` + lineChart(bs.map((b, i) => ({ name: b.backend, color: i, pts: [[Math.max(1, all(b).p50_ns), 0.5], [Math.max(1, all(b).p99_ns), 0.99], [Math.max(1, all(b).p99_9_ns), 0.999], [Math.max(1, all(b).max_ns), 1]] })),
        { title: "latency CDF through p50, p99, p99.9 and max (log scale)", logX: true, xfmt: ns, yfmt: pct, yMin: 0, yMax: 1, w: 560 }) +
        lineChart(bs.map((b, i) => ({ name: b.backend, color: i, pts: b.memory.samples.map(s => [s.t_ns / 1e9, s.rss_bytes]) })),
          { title: "RSS over the replay (s)", yfmt: bytes, xfmt: v => sig3(v) + " s", w: 560 }) + `</div>`;
      h += `<ul class="note">${r.notes.map(n => `<li>${esc(n)}</li>`).join("")}</ul>`;
    }
    section("sec-replay", "Replay: the backends side by side", h);
  }

  finish();

  function drawCompare() {
    const C = D.compare, O = D.overlay;
    const num = v => v === null || v === undefined;
    const fmtOf = u => ({
      ns: ns, bytes: bytes, count: count, ratio: v => num(v) ? "–" : Number(v).toFixed(3),
      per_second: v => num(v) ? "–" : count(v) + " /s", per_hour: v => num(v) ? "–" : Number(v).toFixed(1) + " /h",
    })[u] || count;
    const spct = x => num(x) ? "–" : (x >= 0 ? "+" : "") + (100 * x).toFixed(1) + " %";
    const signed = f => v => num(v) ? "–" : (v < 0 ? "-" : "+") + f(Math.abs(v));
    // A value of compare's document at `path`, bound as the stats page binds its numbers.
    const cv = (path, fmt) => {
      const v = get(C, path);
      if (num(v)) return `<span class="none">–</span>`;
      return `<span data-field="${esc(path)}" data-raw="${esc(raw(v))}">${esc((fmt || text)(v))}</span>`;
    };
    const short = l => String(l || "").split("/").pop();
    const TITLES = { latency: "time inside the allocator, per call", rates: "calls and stalls", memory: "memory", allocator_stats: "the allocator's own statistics (watch logs)" };

    // The verdict: the two sides, the method, one line per group.
    {
      let h = "";
      for (const k of ["base", "candidate"]) {
        const s = C[k];
        h += `<h3>${k}</h3>` + table([{ h: "" }, { h: "" }], [
          [c("logs"), c(s.logs.join(", "))], [c("programs"), c(s.programs.join(", "))], [c("backends"), c(s.backends.join(", "))],
          [c("kinds of log"), c(s.kinds.join(", "))], [c("time slices"), c(s.slices, count, `${k}.slices`)]]);
      }
      const m = C.method;
      h += `<p class="note">intervals: ${esc(m.confidence * 100)} %, bootstrap over ${esc(m.resampling)} (${esc(m.resamples)} resamples, seed ${esc(m.seed)}); a change counts when its interval excludes 0 and it is at least its group's floor (docs/compare.md)</p>`;
      h += `<ul class="verdicts">` + C.verdicts.map((v, i) => `<li id="verdict-${esc(v.group)}" class="${v.differs ? "differs" : "same"}">${cv(`verdicts.${i}.text`)}</li>`).join("") + `</ul>`;
      section("sec-verdict", "Verdict", h);
    }

    // The pair overlaid.
    {
      let h = "";
      const per = { base: O.memory.filter(m => m.side === "base").length, candidate: O.memory.filter(m => m.side === "candidate").length };
      const idx = { base: 0, candidate: 0 };
      const named = O.memory.map(m => ({ m, name: per[m.side] > 1 ? `${m.side} ${++idx[m.side]}` : m.side, color: m.side === "base" ? 0 : 1 }));
      const rss = named.filter(x => x.m.points.some(p => p[1] !== null)).map(x => ({ name: x.name, color: x.color, pts: x.m.points.map(p => [p[0] / 1e9, p[1]]) }));
      const live = named.filter(x => x.m.kind !== "watch").map(x => ({ name: x.name, color: x.color, pts: x.m.points.map(p => [p[0] / 1e9, p[2]]) }));
      h += `<div id="overlay-rss">` + lineChart(rss, { title: "RSS over time, each log from its own start (s)", yfmt: bytes, xfmt: v => sig3(v) + " s", w: 900 }) + `</div>`;
      h += `<div id="overlay-live">` + lineChart(live, { title: "live bytes over time, each log from its own start (s)", yfmt: bytes, xfmt: v => sig3(v) + " s", w: 900 }) + `</div>`;
      const L = O.latency_cdf, ops = Object.keys(L.base).filter(o => L.candidate[o]);
      if (ops.length) {
        h += `<div class="charts">`;
        for (const op of ops) {
          h += `<div id="overlay-cdf-${esc(op)}">` + lineChart([{ name: "base", color: 0, pts: L.base[op] }, { name: "candidate", color: 1, pts: L.candidate[op] }],
            { title: `time inside the allocator, CDF: ${op === "all" ? "every timed call" : op} (log scale)`, logX: true, xfmt: ns, yfmt: pct, yMin: 0, yMax: 1, step: true, w: 560 }) + `</div>`;
        }
        h += `</div>`;
      } else {
        h += `<p class="note" id="no-cdf">no latency CDF: the two sides have no timed calls in common (watch or sampled-only logs, or SHIM_TIMING=none)</p>`;
      }
      section("sec-overlay", "The pair overlaid", h);
    }

    // Side by side: compare's table, a group at a time, with its verdict.
    {
      let h = "";
      const conf = C.method.confidence * 100;
      C.verdicts.forEach((v, k) => {
        const rows = C.metrics.map((m, i) => ({ m, i })).filter(x => x.m.group === v.group);
        const shown = rows.filter(x => !x.m.not_compared);
        const floor = rows.length ? ` (floor ${(rows[0].m.floor * 100).toFixed(0)} %)` : "";
        h += `<h3>${esc(TITLES[v.group] || v.group)}${esc(floor)}</h3>`;
        if (shown.length) {
          h += table([{ h: "" }, { h: "metric" }, { h: "base", num: 1 }, { h: "candidate", num: 1 }, { h: "change", num: 1 }, { h: `${conf} % interval, low`, num: 1 }, { h: "high", num: 1 }, { h: "what" }],
            shown.map(({ m, i }) => {
              const f = fmtOf(m.unit), b = `metrics.${i}`;
              const rel = !num(m.relative);
              const iv = rel ? m.relative_interval : m.interval, ip = rel ? `${b}.relative_interval` : `${b}.interval`;
              const ifmt = rel ? spct : signed(f);
              return [c(m.differs ? "*" : m.judged ? "" : "~"), c(m.name, text, `${b}.name`), c(m.base, f, `${b}.base`), c(m.candidate, f, `${b}.candidate`),
                rel ? c(m.relative, spct, `${b}.relative`) : c(m.change, signed(f), `${b}.change`),
                iv ? c(iv[0], ifmt, `${ip}.0`) : c("none: one value a side"), iv ? c(iv[1], ifmt, `${ip}.1`) : c(""), c(m.what)];
            }), "compare-table");
        }
        const left = rows.filter(x => x.m.not_compared);
        if (left.length) h += `<p class="note">not compared: ${left.map(x => esc(x.m.name)).join(", ")} (${esc(left[0].m.not_compared)})</p>`;
        if (shown.some(x => !x.m.judged)) h += `<p class="note">~ not judged from fewer than 5 logs a side (run-to-run noise: docs/compare.md)</p>`;
        h += `<p>verdict: ${cv(`verdicts.${k}.text`)}</p>`;
      });
      section("sec-compare", "Side by side", h);
    }

    // The call sites that moved most.
    {
      let h = "";
      const S2 = C.sites;
      if (S2) {
        if (S2.estimated) h += `<p class="note">estimated from samples (a log in sample mode)</p>`;
        for (const [k, title, f] of [["alloc_bytes", "bytes allocated", bytes], ["live_at_peak_bytes", "bytes live at the peak", bytes], ["timed_ns", "time inside the allocator (timed calls)", ns]]) {
          h += `<h3>by ${esc(title)} (mean per log)</h3>`;
          h += S2[k].length ? table([{ h: "site" }, { h: "base", num: 1 }, { h: "candidate", num: 1 }, { h: "change", num: 1 }],
            S2[k].map((r, j) => [c(r.site, text, `sites.${k}.${j}.site`), c(r.base, f, `sites.${k}.${j}.base`), c(r.candidate, f, `sites.${k}.${j}.candidate`), c(r.change, signed(f), `sites.${k}.${j}.change`)]))
            : `<p class="note">no change</p>`;
        }
      } else {
        h = `<p class="note" id="no-stacks">no call stacks on both sides: the call sites that moved need logs recorded with stacks (SHIM_STACKS=sample or all)</p>`;
      }
      section("sec-sites", "Call sites that moved", h);
    }

    // The differential flame graph (compare --flamegraph's, vs.rs made it inline).
    {
      const F = D.diff_flame || {};
      const h = F.svg
        ? `<p class="note">widths: the candidate's bytes allocated per stack; colours: the change from the base, red where a stack's own bytes grew, blue where they shrank, the stronger the colour the larger the change (white: unchanged). Hover a frame for its figures; <code>shimlog compare --flamegraph</code> writes it on its own, interactive.</p><figure class="diffflame">${F.svg}</figure>`
        : `<p class="note" id="no-diff-flame">no differential flame graph: ${esc(F.none || "not made")}</p>`;
      section("sec-diffflame", "Differential flame graph: where the bytes allocated moved", h);
    }
  }

  function finish() {
    main.innerHTML = parts.map(x => `<section id="${x.id}"><h2>${esc(x.title)}</h2>${x.html}</section>`).join("");
    document.getElementById("toc").innerHTML = parts.map(x => `<a href="#${x.id}">${esc(x.title)}</a>`).join("");
    sortable(main);
    const res = (performance.getEntriesByType ? performance.getEntriesByType("resource") : []).length;
    document.body.dataset.resources = res;
    document.getElementById("footer").textContent = `Written by shimlog report ${D.shimlog_version} from ${D.logs.join(", ")}. Everything on this page is in this file (${res} resources loaded from elsewhere).`;
    document.body.dataset.rendered = "ok";
  }
})();
