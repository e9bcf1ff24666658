// cli/web/dash.js - pstrain's dashboard page: polls data.json about once a
// second for the rows the jobs' files gained (byte offsets in ?from=, so
// each row crosses once) and redraws the panels with Chart.js (Debian's,
// served by pstrain at /chart.js). A file read from its start comes as an
// overview (?points=): the rows that draw its lines as they are and the
// sums of every row, so a folder of many long runs paints at once; the
// rows written later come whole. No reload, no request to any other
// host. Each panel says in the DOM how many points it
// draws (data-points), the rows behind them (data-rows) and its latest
// values (data-latest, JSON), for people and for tests alike.
"use strict";
(function () {
  const MAX_POINTS = 800; // per series: more only slows the drawing
  // The points of a line the server's overview of a file keeps (?points=
  // in the page's address sets them): a file's rows read later are
  // thinned again by asking for a new overview past 4 times that.
  const POINTS = Math.min(20000, Math.max(2, Number(new URLSearchParams(
    window.location.search).get("points")) || 600));  const PALETTE = ["#3c78d8", "#e8710a", "#1a7f37", "#b42318", "#7e3ff2",
    "#0e7490", "#a16207", "#be185d", "#4b5563", "#65a30d"];
  const DASHES = [[], [6, 3], [2, 2], [10, 3, 2, 3], [1, 4]];
  const S = {
    view: "", title: "", workerCols: [], evalCols: [], jobs: [],
    charts: {}, fetches: 0, chartMissing: null,
    // The reader's choices (the controls under the title): each mode's
    // mean ± sd or (also) every run, an EMA of loss and gradient norm
    // (TensorBoard's weight), log y, and the modes shown.
    // x: the left charts' axis (steps or examples); zoom: per axis kind
    // (step, examples, time) the range shown, null for all.
    ui: {group: true, runs: false, smooth: 0.6, logy: false, hidden: {},
      x: "step", zoom: {}, hiddenSeeds: {}},
  };
  const haveChart = typeof window.Chart !== "undefined";

  function $(id) { return document.getElementById(id); }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;",
      ">": "&gt;", '"': "&quot;", "'": "&#39;"})[c]);
  }
  function fmt(v, d) {
    if (v === null || v === undefined || Number.isNaN(v)) return "n/a";
    return Number(v).toFixed(d);
  }
  function dur(s) {
    if (s === null || s === undefined || !Number.isFinite(s)) return "unknown";
    s = Math.max(0, Math.round(s));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    const r = s % 60;
    return h > 0 ? h + "h" + String(m).padStart(2, "0") + "m"
      : m > 0 ? m + "m" + String(r).padStart(2, "0") + "s" : r + "s";
  }

  // ------------------------------------------------------------ data
  function col(name) { return S.workerCols.indexOf(name); }
  function ecol(name) { return S.evalCols.indexOf(name); }

  function cursor() {
    return S.jobs.map((j) => [j.evalNext].concat(j.wNext).join(".")).join(",");
  }
  function query() {
    return "points=" + POINTS + "&draw=" + S.jobs.map((j) => j.draw).join(",") +
      "&from=" + cursor();
  }

  // take merges one file's part: rows are kept unless the server read
  // from elsewhere than where the page stood (a file made afresh).
  function take(rows, next, part) {
    if (part.from !== next) rows.length = 0;
    for (const r of part.rows) rows.push(r);
    return part.next;
  }
  // takeWorker merges worker r's part: an overview (it has agg) stands
  // for the whole file, its rows' indices in `index` and the sums of
  // every row in agg; the rows after it come whole.
  function takeWorker(j, r, part) {
    if (!j.rows[r]) {
      j.rows[r] = []; j.wNext[r] = 0; j.idx[r] = []; j.agg[r] = null; j.tail0[r] = 0;
    }
    if (part.agg) {
      j.rows[r] = part.rows.slice();
      j.idx[r] = part.index;
      j.agg[r] = part.agg;
      j.tail0[r] = part.rows.length;
      j.sparse[r] = part.rows.length < part.agg.rows && !part.drawn;
      j.wNext[r] = part.next;
      return;
    }
    const had = j.wNext[r];
    j.wNext[r] = take(j.rows[r], had, part);
    if (part.from !== had) { j.idx[r] = []; j.agg[r] = null; j.tail0[r] = 0; }
    // Too many rows since the overview: ask for a new one.
    if (j.rows[r].length - j.tail0[r] > 4 * POINTS) j.wNext[r] = 0;
  }
  // rowIndex: the index in its file of worker r's k-th row held.
  function rowIndex(j, r, k) {
    if (k < j.tail0[r]) return j.idx[r][k];
    return (j.agg[r] ? j.agg[r].rows : 0) + k - j.tail0[r];
  }
  // rowsOfFile: how many rows worker r's file had, as far as known.
  function rowsOfFile(j, r) {
    return j.rows[r] && j.rows[r].length ? rowIndex(j, r, j.rows[r].length - 1) + 1 : 0;
  }

  function merge(d) {
    S.view = d.view;
    S.title = d.title;
    S.workerCols = d.worker_cols;
    S.evalCols = d.eval_cols;
    S.chartMissing = d.chartjs;
    let more = false;
    d.jobs.forEach((dj, i) => {
      let j = S.jobs[i];
      if (!j) {
        j = S.jobs[i] = {rows: [], wNext: [], evalRows: [], evalNext: 0,
          idx: [], agg: [], tail0: [], sparse: [], draw: 0};
      }
      Object.assign(j, {label: dj.label, dir: dj.dir, mode: dj.mode,
        state: dj.state, steps: dj.steps, batch: dj.batch, t0: dj.t0,
        counts: dj.counts,
        events: dj.events, checkpoints: dj.checkpoints,
        checkpointDir: dj.checkpoint_dir, evalSet: dj.eval_set,
        summary: dj.summary, workers: dj.workers});
      dj.worker.forEach((part, r) => {
        takeWorker(j, r, part);
        more = more || part.more || j.wNext[r] === 0 && part.next > 0;
      });
      // A comparison draws each job's lowest-ranked worker with rows:
      // when the server sent that one sparse, ask for it drawn.
      const ref = refWorker(j);
      if (isCompare() && j.sparse[ref]) {
        j.draw = ref;
        j.wNext[ref] = 0;
        j.sparse[ref] = false;
        more = true;
      }
      j.evalNext = take(j.evalRows, j.evalNext, dj.eval);
      more = more || dj.eval.more;
    });
    return more;
  }

  // ------------------------------------------------------------ series
  // The worker whose rows stand for a job: the lowest-ranked with rows.
  function refWorker(j) {
    for (let r = 0; r < j.rows.length; r++)
      if (j.rows[r] && j.rows[r].length > 0) return r;
    return 0;
  }
  function isCompare() { return S.view !== "run" || S.jobs.length !== 1; }

  const modeOrder = [];
  function modeIndex(mode) {
    let i = modeOrder.indexOf(mode);
    if (i < 0) { modeOrder.push(mode); i = modeOrder.length - 1; }
    return i;
  }
  function seedIndex(j) {
    const m = /seed-(\d+)/.exec(j.label || "");
    return m ? Number(m[1]) - 1 : 0;
  }
  function styleOf(k, j) {
    if (!isCompare()) return {color: PALETTE[k % PALETTE.length], dash: []};
    return {color: PALETTE[modeIndex(groupOf(j)) % PALETTE.length],
      dash: DASHES[Math.max(0, seedIndex(j)) % DASHES.length]};
  }

  // lines: for each series (a worker in a run, a job's worker in a
  // comparison), its points {x, y} from the rows' columns x and y.
  // firstStep: when job j's first step began, seconds after its start
  // (the earliest first row of any worker: wall_s less step_ms). Time
  // axes count from there, as compare's plots and train_s_to_A do:
  // start-up is not training time.
  function firstStep(j) {
    const w = col("wall_s"), s = col("step_ms");
    let t = null;
    for (const rows of j.rows) {
      if (!rows || !rows.length) continue;
      const b = rows[0][w] - rows[0][s] / 1000;
      if (t === null || b < t) t = b;
    }
    return t === null ? 0 : t;
  }

  // countAt: how many rows worker r of job j had written by wall time t
  // (its rows' index, on the line between the rows held around t).
  function countAt(j, r, t) {
    const rows = j.rows[r] || [], wc = col("wall_s");
    let lo = 0, hi = rows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (rows[mid][wc] <= t) lo = mid + 1; else hi = mid;
    }
    if (lo === 0) return 0;
    const k = lo - 1, i = rowIndex(j, r, k);
    if (lo === rows.length) return i + 1;
    const j1 = rowIndex(j, r, lo), a = rows[k][wc], b = rows[lo][wc];
    return i + 1 + (b > a ? Math.floor((j1 - i - 1) * (t - a) / (b - a)) : 0);
  }
  // examplesFn: the examples all of job j's workers had processed by
  // wall time t (their rows by then times the per-worker batch, as
  // compare's plots count them), or null when the batch is not known.
  function examplesFn(j) {
    const w = j.workers || j.rows.length, pwb = j.batch / w;
    if (!(pwb > 0)) return null;
    return (t) => {
      if (t === null) return null;
      let n = 0;
      for (let r = 0; r < j.rows.length; r++) n += countAt(j, r, t);
      return n * pwb;
    };
  }
  // xFn: a worker row's x on axis kind: its step, the examples processed
  // by its time, or seconds since its job's first step (start-up is not
  // training time, as in compare's plots and train_s_to_A).
  function xFn(j, kind) {
    const sc = col("step"), wc = col("wall_s");
    if (kind === "time") {
      const x0 = firstStep(j);
      return (row) => row[wc] === null ? null : row[wc] - x0;
    }
    if (kind === "examples") {
      const ex = examplesFn(j);
      return (row) => ex ? ex(row[wc]) : null;
    }
    return (row) => row[sc];
  }

  // series: each worker's (a run) or each job's reference worker's (a
  // comparison) rows as points of x on axis kind and column yc; each
  // point keeps its step (s), which smoothing needs.
  function series(kind, yc) {
    const out = [], sc = col("step");
    const add = (j, w, label, k) => {
      const pts = [], xf = xFn(j, kind);
      for (const r of j.rows[w]) {
        const x = xf(r), y = r[yc];
        if (x !== null && y !== null) pts.push({x: x, y: y, s: r[sc]});
      }
      const st = styleOf(k, j);
      out.push({label: label, pts: pts, color: st.color, dash: st.dash,
        group: groupOf(j), rows: rowsOfFile(j, w)});
    };
    if (!isCompare()) {
      const j = S.jobs[0];
      j.rows.forEach((_, r) => add(j, r, "worker " + r, r));
    } else {
      S.jobs.forEach((j, i) => {
        const r = refWorker(j);
        if (shown(j) && j.rows[r] && j.rows[r].length)
          add(j, r, j.label, i);
      });
    }
    return out;
  }
  // shown: whether job j's mode is ticked in the picker.
  // and its seed's (a job whose label names no seed is always shown).
  function shown(j) {
    return !S.ui.hidden[groupOf(j)] && !S.ui.hiddenSeeds[seedOf(j)];
  }
  function seedOf(j) {
    const m = /seed-(\d+)$/.exec(j.label || "");
    return m ? "seed " + m[1] : "";
  }

  // thin keeps at most about MAX_POINTS of a series: in each of
  // MAX_POINTS / 2 runs of points, the lowest and the highest, in their
  // order, so that a spike is drawn at every refresh, not now and then.
  function thin(pts) {
    if (pts.length <= MAX_POINTS) return pts;
    const k = Math.ceil(pts.length / (MAX_POINTS / 2)), out = [];
    for (let i = 0; i < pts.length; i += k) {
      let lo = i, hi = i;
      for (let m = i + 1; m < Math.min(i + k, pts.length); m++) {
        if (pts[m].y < pts[lo].y) lo = m;
        if (pts[m].y > pts[hi].y) hi = m;
      }
      out.push(pts[Math.min(lo, hi)]);
      if (hi !== lo) out.push(pts[Math.max(lo, hi)]);
    }
    return out;
  }

  // yAt is the y of points pts (x ascending) at x, on the line between
  // the points around it; null outside them.
  function yAt(pts, x) {
    if (!pts.length || x < pts[0].x || x > pts[pts.length - 1].x) return null;
    let lo = 0, hi = pts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (pts[mid].x < x) lo = mid + 1; else hi = mid;
    }
    if (lo === 0 || pts[lo].x === x) return pts[lo].y;
    const a = pts[lo - 1], b = pts[lo];
    return a.y + (b.y - a.y) * (x - a.x) / (b.x - a.x);
  }

  // groupLines: in a comparison with "mean ± sd per mode" ticked, per
  // mode the mean of its jobs' lines and a band of ± one sd, read at
  // GROUP_POINTS values of x over the range every job of the mode covers
  // (each job's y on the line between its points), as compare's plots
  // are; with "every run" ticked, the jobs' own lines too, faint.
  const GROUP_POINTS = 200;
  function groupLines(lines) {
    if (!isCompare() || !S.ui.group) return lines;
    const out = [], groups = [];
    lines.forEach((l) => { if (groups.indexOf(l.group) < 0) groups.push(l.group); });
    groups.forEach((g) => {
      const ls = lines.filter((l) => l.group === g && l.pts.length);
      if (!ls.length) return;
      const first = ls.map((l) => l.pts[0].x), last = ls.map((l) => l.pts[l.pts.length - 1].x);
      let lo = Math.max(...first), hi = Math.min(...last);
      if (hi < lo) { lo = Math.min(...first); hi = Math.max(...last); }
      const n = hi > lo ? GROUP_POINTS : 1, mean = [], up = [], dn = [];
      for (let i = 0; i < n; i++) {
        const x = n > 1 ? lo + (hi - lo) * i / (n - 1) : lo;
        const ys = ls.map((l) => yAt(l.pts, x)).filter((y) => y !== null);
        if (!ys.length) continue;
        const m = ys.reduce((a, b) => a + b, 0) / ys.length;
        const sd = ys.length > 1 ? Math.sqrt(ys.reduce((a, y) =>
          a + (y - m) * (y - m), 0) / (ys.length - 1)) : 0;
        mean.push({x: x, y: m});
        up.push({x: x, y: m + sd});
        dn.push({x: x, y: m - sd});
      }
      const c = ls[0].color;
      out.push({label: "", pts: dn, color: c, dash: [], band: "lo", group: g});
      out.push({label: "", pts: up, color: c, dash: [], band: "hi", group: g});
      out.push({label: ls.length > 1 ? g + " (mean ± sd of " + ls.length + ")" : g,
        pts: mean, color: c, dash: [], group: g, width: 2.2});
    });
    if (S.ui.runs) lines.forEach((l) => out.push(Object.assign({}, l, {faint: true})));
    return out;
  }

  // ------------------------------------------------------------ charts
  function lineChart(id, xTitle, yTitle) {
    if (!haveChart) return null;
    return new window.Chart($(id), {
      type: "line",
      data: {datasets: []},
      options: {
        animation: false, parsing: false, normalized: true,
        responsive: true, maintainAspectRatio: false,
        interaction: {mode: "nearest", intersect: false},
        elements: {point: {radius: 0}, line: {borderWidth: 1.5}},
        scales: {
          x: {type: "linear", title: {display: true, text: xTitle}},
          y: {type: "linear", title: {display: true, text: yTitle}},
        },
        // The legend names the lines a reader picks out: each mode's
        // mean, not every run's faint line (its tooltip names it).
        plugins: {legend: {position: "bottom",
          labels: {boxWidth: 12, font: {size: 11},
            filter: (item, data) => item.text !== "" &&
              !data.datasets[item.datasetIndex].ptFaint}}},
      },
    });
  }

  // zoomable lets a reader drag across chart c to show that range of x
  // (every chart of the same axis kind follows), and double-click to
  // show all again; the points in the range are then thinned anew, so
  // a zoom shows what the overview holds there.
  function zoomable(c) {
    if (!c) return;
    const canvas = c.canvas, box = document.createElement("div");
    box.className = "zoombox";
    box.hidden = true;
    canvas.parentNode.appendChild(box);
    let x0 = null;
    const px = (e) => e.clientX - canvas.getBoundingClientRect().left;
    canvas.addEventListener("mousedown", (e) => {
      const a = c.chartArea, x = px(e);
      if (x < a.left || x > a.right) return;
      x0 = x;
    });
    canvas.addEventListener("mousemove", (e) => {
      if (x0 === null) return;
      const a = c.chartArea, x = Math.min(a.right, Math.max(a.left, px(e)));
      box.hidden = false;
      Object.assign(box.style, {left: Math.min(x0, x) + "px", width:
        Math.abs(x - x0) + "px", top: a.top + "px", height: (a.bottom - a.top) + "px"});
    });
    window.addEventListener("mouseup", (e) => {
      if (x0 === null) return;
      const a = c.chartArea, x = Math.min(a.right, Math.max(a.left, px(e)));
      box.hidden = true;
      if (Math.abs(x - x0) >= 5) {
        const u = c.scales.x.getValueForPixel(Math.min(x0, x));
        const v = c.scales.x.getValueForPixel(Math.max(x0, x));
        S.ui.zoom[c.ptKind] = [u, v];
        render();
      }
      x0 = null;
    });
    canvas.addEventListener("dblclick", () => {
      delete S.ui.zoom[c.ptKind];
      render();
    });
  }

  // inRange: pts (x ascending) within [lo, hi], with the point just
  // outside each end so that the line runs to the chart's edges.
  function inRange(pts, lo, hi) {
    let a = 0, b = pts.length;
    while (a < b && pts[a].x < lo) a++;
    while (b > a && pts[b - 1].x > hi) b--;
    return pts.slice(Math.max(0, a - 1), Math.min(pts.length, b + 1));
  }
  function barChart(id, xTitle, yTitle, stacked) {
    if (!haveChart) return null;
    return new window.Chart($(id), {
      type: "bar",
      data: {labels: [], datasets: []},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: {
          x: {stacked: stacked, title: {display: true, text: xTitle}},
          y: {stacked: stacked, beginAtZero: true,
            title: {display: true, text: yTitle}},
        },
        plugins: {legend: {position: "bottom",
          labels: {boxWidth: 12, font: {size: 11}}}},
      },
    });
  }
  function charts() {
    if (S.charts.lossStep || !haveChart) return;
    S.charts.lossStep = lineChart("c-loss-step", "step", "loss");
    S.charts.lossTime = lineChart("c-loss-time",
      "seconds since the first step", "loss");
    S.charts.accStep = lineChart("c-acc-step", "worker 0's steps", "accuracy");
    S.charts.accTime = lineChart("c-acc-time",
      "seconds since the first step", "accuracy");
    S.charts.stepMs = lineChart("c-step-ms", "step", "step ms");
    S.charts.split = barChart("c-split", "", "mean ms", true);
    S.charts.gnorm = lineChart("c-gnorm", "step", "gradient norm");
    S.charts.stale = barChart("c-stale", "staleness", "gradients", false);
    for (const k of ["lossStep", "accStep", "stepMs", "gnorm"])
      S.charts[k].ptLeft = S.charts[k].options.scales.x.title.text;
    for (const k of ["lossStep", "lossTime", "accStep", "accTime", "stepMs", "gnorm"])
      zoomable(S.charts[k]);
  }

  // draw sets chart c's lines, x on axis kind (zoomed as the reader
  // chose); returns the points drawn. A band's lower edge draws
  // nothing; its upper edge fills down to it.
  function draw(c, lines, kind) {
    let n = 0;
    const z = S.ui.zoom[kind];
    if (c) {
      c.ptKind = kind;
      c.options.scales.x.min = z ? z[0] : undefined;
      c.options.scales.x.max = z ? z[1] : undefined;
      // A left chart's x: its steps' title, or examples.
      if (c.ptLeft) c.options.scales.x.title.text = kind === "examples"
        ? "examples processed (all workers)" : c.ptLeft;
    }
    const ds = lines.map((l) => {
      const pts = thin(z ? inRange(l.pts, z[0], z[1]) : l.pts);
      n += pts.length;
      if (l.band)
        return {label: "", data: pts, borderColor: l.color + "00",
          backgroundColor: l.color + "33", pointRadius: 0, borderWidth: 0,
          fill: l.band === "hi" ? "-1" : false};
      return {label: l.label, data: pts, borderColor: l.faint ? l.color + "66"
        : l.color, backgroundColor: l.color, borderDash: l.dash,
        pointRadius: 0, borderWidth: l.width || (l.faint ? 1 : 1.5),
        fill: false, ptFaint: !!l.faint};
    });
    if (c) { c.data.datasets = ds; c.update("none"); }
    return n;
  }
  // logY sets chart c's y axis to log or linear, as ticked.
  function logY(c) {
    if (!c) return;
    c.options.scales.y.type = S.ui.logy ? "logarithmic" : "linear";
  }
  function drawBars(c, labels, sets) {
    if (!c) return;
    c.data.labels = labels;
    c.data.datasets = sets;
    c.update("none");
  }

  function panel(id, points, rows, latest, caption) {
    const p = $(id);
    p.dataset.points = String(points);
    p.dataset.rows = String(rows);
    p.dataset.latest = JSON.stringify(latest);
    p.querySelector(".caption").innerHTML = caption;
  }
  function rowsOf(lines) {
    return lines.reduce((a, l) => a + (l.rows !== undefined ? l.rows : l.pts.length), 0);
  }

  // The job whose latest values the captions quote: in a comparison, the
  // one running, else the last one with rows.
  function focusJob() {
    let f = 0;
    S.jobs.forEach((j, i) => {
      if (j.rows.some((r) => r && r.length)) f = i;
    });
    S.jobs.forEach((j, i) => { if (j.state === "running") f = i; });
    return f;
  }
  function lastRow(j) {
    const r = refWorker(j), rows = j.rows[r] || [];
    return rows.length ? {worker: r, row: rows[rows.length - 1]} : null;
  }

  // ------------------------------------------------------------ panels
  function jobProgress(j) {
    const lr = lastRow(j), st = col("step"), wc = col("wall_s");
    const step = lr ? lr.row[st] : 0, wall = lr ? lr.row[wc] : 0;
    let eta = null;
    if (j.state === "running" && j.steps && step > 0 && wall > 0)
      eta = (j.steps - step) * wall / step;
    else if (j.state === "finished") eta = 0;
    // held: the rows the page holds of the worker it draws, of `rows`.
    const r = refWorker(j);
    return {label: j.label, mode: j.mode, state: j.state, step: step,
      steps: j.steps, elapsed_s: wall, eta_s: eta,
      rate: wall > 0 ? step / wall : null,
      held: j.rows[r] ? j.rows[r].length : 0, rows: rowsOfFile(j, r)};
  }

  function renderProgress() {
    const ps = S.jobs.map(jobProgress);
    let html = "";
    if (isCompare()) html += modesTable(ps);
    // Each job's configuration, from its summary.json once it has one.
    const conf = (j) => {
      const m = j.summary;
      if (!m) return "<td colspan=\"4\" class=\"muted\">(when it ends)</td>";
      return "<td class=\"num\">" + esc(m.lr === null ? "?" : m.lr) +
        "</td><td class=\"num\">" + esc(m.batch === null ? "?" : m.batch) +
        "</td><td>" + esc(m.optimizer || "?") + "</td><td class=\"num\">" +
        esc(m.seed === null ? "?" : m.seed) + "</td>";
    };
    html += "<table class=\"jobs\"><tr><th>job</th><th>mode</th><th>lr</th>" +
      "<th>batch</th><th>optimizer</th><th>seed</th><th>state</th><th>step</th>" +
      "<th></th><th>elapsed</th><th>steps/s</th><th>ETA</th></tr>";
    ps.forEach((p, i) => {
      const frac = p.steps ? Math.min(1, p.step / p.steps) : 0;
      html += "<tr data-job=\"" + i + "\"><td>" + esc(p.label || "this job") +
        "</td><td>" + esc(p.mode || "?") + "</td>" + conf(S.jobs[i]) +
        "<td class=\"state-" +
        esc(p.state) + "\">" + esc(p.state) + "</td><td class=\"num\">" +
        p.step + " / " + (p.steps ? p.steps : "?") +
        "</td><td><span class=\"bar\"><span style=\"width:" +
        (100 * frac).toFixed(1) + "%\"></span></span></td><td class=\"num\">" +
        dur(p.elapsed_s) + "</td><td class=\"num\">" + fmt(p.rate, 1) +
        "</td><td class=\"num\">" + (p.state === "running"
          ? (p.steps ? dur(p.eta_s) : "unknown (steps not known)")
          : p.state === "finished" ? "done" : "") + "</td></tr>";
    });
    html += "</table>";
    $("progress-body").innerHTML = html;
    // A comparison's ETA: the job running, then each job waiting at the
    // mean length of those finished (or of the running one's total).
    let total = null;
    if (isCompare()) {
      const done = ps.filter((p) => p.state === "finished" && p.elapsed_s > 0);
      const run = ps.find((p) => p.state === "running");
      const pending = ps.filter((p) => p.state === "pending").length;
      const each = done.length ? done.reduce((a, p) => a + p.elapsed_s, 0) /
        done.length : run && run.eta_s !== null ? run.elapsed_s + run.eta_s : null;
      if (run && run.eta_s !== null && each !== null)
        total = run.eta_s + pending * each;
      else if (!run && pending === 0) total = 0;
    }
    const f = ps[focusJob()] || {};
    const cap = isCompare()
      ? S.jobs.length + " jobs: " + ps.filter((p) => p.state === "finished").length +
        " finished, " + ps.filter((p) => p.state === "running").length +
        " running, " + ps.filter((p) => p.state === "pending").length +
        " waiting; whole comparison ETA " + (total === null ? "unknown" : dur(total))
      : "step " + f.step + " of " + (f.steps || "?") + ", ETA " +
        (f.state === "running" ? dur(f.eta_s) : f.state);
    panel("panel-progress", ps.filter((p) => p.step > 0).length,
      ps.reduce((a, p) => a + p.step, 0), {jobs: ps, eta_s: total}, esc(cap));
  }

  // A comparison's mode: its label less "/seed-S" (ssp-4, async-matched-lr).
  function groupOf(j) {
    return (j.label || j.mode || "").replace(/\/seed-\d+$/, "");
  }

  function modesTable(ps) {
    const modes = [];
    S.jobs.forEach((j) => { if (modes.indexOf(groupOf(j)) < 0) modes.push(groupOf(j)); });
    const cell = (m, f) => "<td class=\"num\">" + f(S.jobs.map((j, i) =>
      ({j: j, p: ps[i]})).filter((x) => groupOf(x.j) === m)) + "</td>";
    const lossC = col("loss");
    const row = (name, f) => "<tr><th>" + name + "</th>" +
      modes.map((m) => cell(m, f)).join("") + "</tr>";
    let h = "<table class=\"modes\"><tr><th></th>" +
      modes.map((m) => "<th>" + esc(m || "?") + "</th>").join("") + "</tr>";
    h += row("jobs finished", (xs) => xs.filter((x) => x.p.state === "finished").length +
      " / " + xs.length);
    h += row("latest loss", (xs) => {
      const w = xs.filter((x) => lastRow(x.j)).pop();
      return w ? fmt(lastRow(w.j).row[lossC], 4) + " (" + esc(w.j.label) + ")" : "n/a";
    });
    h += row("last accuracy", (xs) => {
      const w = xs.filter((x) => x.j.evalRows.length).pop();
      return w ? fmt(w.j.evalRows[w.j.evalRows.length - 1][ecol("acc")], 4) : "n/a";
    });
    h += row("idle fraction", (xs) => {
      const v = xs.map((x) => idle(x.j)).filter((v) => v !== null);
      return v.length ? fmt(v.reduce((a, b) => a + b, 0) / v.length, 3) : "n/a";
    });
    h += row("mean staleness", (xs) => {
      const v = xs.map((x) => meanStale(x.j)).filter((v) => v !== null);
      return v.length ? fmt(v.reduce((a, b) => a + b, 0) / v.length, 2) : "n/a";
    });
    return h + "</table>";
  }

  // smooth: each curve of loss or gradient norm as TensorBoard smooths
  // it, an exponential moving average of weight S.ui.smooth per step,
  // debiased at its start (0: every step as it is). Where an overview
  // left steps out, a point decays the average by the weight to the
  // power of the steps since the last one, as those steps would have.
  function smooth(lines) {
    const w = S.ui.smooth;
    if (!(w > 0)) return lines;
    return lines.map((l) => {
      let last = 0, norm = 0, prev = null;
      const pts = l.pts.map((p) => {
        const gap = prev === null || !(p.s > prev) ? 1 : p.s - prev;
        const d = Math.pow(w, gap);
        prev = p.s;
        last = last * d + (1 - d) * p.y;
        norm = norm * d + (1 - d);
        return {x: p.x, y: last / norm, s: p.s};
      });
      return Object.assign({}, l, {pts: pts});
    });
  }
  function smoothNote() {
    return S.ui.smooth > 0 ? "smoothed (EMA weight " + S.ui.smooth.toFixed(2) +
      ")" : "not smoothed";
  }

  function renderLoss() {
    const a = smooth(series(S.ui.x, col("loss")));
    const b = smooth(series("time", col("loss")));
    logY(S.charts.lossStep);
    logY(S.charts.lossTime);
    const n = draw(S.charts.lossStep, groupLines(a), S.ui.x) +
      draw(S.charts.lossTime, groupLines(b), "time");
    const fi = focusJob(), j = S.jobs[fi], lr = j && lastRow(j);
    const latest = lr ? {job: fi, worker: lr.worker, step: lr.row[col("step")],
      loss: lr.row[col("loss")],
      t: lr.row[col("wall_s")] - firstStep(j)} : null;
    panel("panel-loss", n, rowsOf(a), latest, latest
      ? esc((isCompare() ? j.label + ", " : "") + "worker " + latest.worker +
        ": step " + latest.step + ", loss " + fmt(latest.loss, 4) + " at " +
        fmt(latest.t, 1) + " s of training") + " &middot; " +
        (isCompare() ? "each job's lowest-ranked worker, " : "") + smoothNote() +
        (isCompare() && S.ui.group ? ", each mode's mean ± sd over its jobs" : "")
      : "no step yet");
  }

  // A click model's evaluations have an AUC: the panel shows it instead
  // of the accuracy at 0.5, which says little there.
  function aucShown() {
    const u = ecol("auc");
    return u >= 0 && S.jobs.some((j) => j.evalRows.some((r) => r[u] !== null));
  }

  function renderAccuracy() {
    const a = [], b = [];
    const sc = ecol("worker_step"), vc = ecol("step"), wc = ecol("wall_s");
    const auc = aucShown(), ac = auc ? ecol("auc") : ecol("acc");
    const what = auc ? "AUC" : "accuracy";
    S.jobs.forEach((j, i) => {
      if (!j.evalRows.length || (isCompare() && !shown(j))) return;
      const st = styleOf(i, j);
      const label = isCompare() ? j.label : (j.evalSet || "") + " " + what;
      const p1 = [], p2 = [], x0 = firstStep(j);
      const ex = S.ui.x === "examples" ? examplesFn(j) : null;
      for (const r of j.evalRows) {
        if (r[ac] === null) continue;
        const x = S.ui.x === "examples" ? ex && ex(r[wc])
          : r[sc] !== null ? r[sc] : r[vc];
        if (x !== null) p1.push({x: x, y: r[ac]});
        p2.push({x: r[wc] - x0, y: r[ac]});
      }
      const g = groupOf(j);
      a.push({label: label, pts: p1, color: st.color, dash: st.dash, group: g});
      b.push({label: label, pts: p2, color: st.color, dash: st.dash, group: g});
    });
    const n = draw(S.charts.accStep, groupLines(a), S.ui.x) +
      draw(S.charts.accTime, groupLines(b), "time");
    const fi = focusJob(), j = S.jobs[fi];
    let latest = null;
    if (j && j.evalRows.length) {
      const r = j.evalRows[j.evalRows.length - 1];
      latest = {job: fi, set: j.evalSet, step: r[vc], worker_step: r[sc],
        acc: r[ac], loss: r[ecol("loss")], wall_s: r[wc]};
    }
    const set = j && j.evalSet ? j.evalSet : "validation or test";
    panel("panel-accuracy", n, rowsOf(a), latest, latest
      ? esc((isCompare() ? j.label + ": " : "") + set + " " + what + " " +
        fmt(latest.acc, 4) + " (loss " + fmt(latest.loss, 4) +
        ") at version " + latest.step + ", worker 0's step " +
        latest.worker_step) +
        " &middot; eval.csv: the " + esc(set) + " set"
      : "no evaluation yet (eval.csv has no row)");
  }

  // tailRows: worker r's rows past its overview (every one of them).
  function tailRows(j, r) { return (j.rows[r] || []).slice(j.tail0[r] || 0); }
  // sums of worker r's step, compute and communication ms over every
  // row of its file: the overview's sums and the rows since.
  function sums(j, r) {
    const s = col("step_ms"), c = col("compute_ms"), m = col("comm_ms");
    const a = j.agg[r];
    let st = a ? a.step_ms || 0 : 0, cp = a ? a.compute_ms || 0 : 0;
    let cm = a ? a.comm_ms || 0 : 0;
    const rows = tailRows(j, r);
    for (const x of rows) {
      if (x[s] === null || x[c] === null || x[m] === null) continue;
      st += x[s]; cp += x[c]; cm += x[m];
    }
    return {n: (a ? a.rows : 0) + rows.length, step: st, compute: cp, comm: cm};
  }
  function idle(j) {
    let st = 0, cm = 0;
    j.rows.forEach((_, r) => { const s = sums(j, r); st += s.step; cm += s.comm; });
    return st > 0 ? cm / st : null;
  }
  // staleOf: worker r's staleness over every row: histogram (0 to 63,
  // the last bin "63 and above"), rows with a value, their sum.
  function staleOf(j, r) {
    const c = col("staleness"), a = j.agg[r];
    const out = {hist: a ? a.stale.slice() : [], n: a ? a.stale_rows : 0,
      sum: a ? a.stale_sum || 0 : 0};
    for (const x of tailRows(j, r)) {
      if (x[c] === null) continue;
      const b = Math.min(63, Math.max(0, Math.round(x[c])));
      while (out.hist.length <= b) out.hist.push(0);
      out.hist[b]++;
      out.n++;
      out.sum += x[c];
    }
    return out;
  }
  function meanStale(j) {
    let n = 0, s = 0;
    j.rows.forEach((_, r) => { const x = staleOf(j, r); n += x.n; s += x.sum; });
    return n ? s / n : null;
  }

  function renderStepTime() {
    const lines = series(S.ui.x, col("step_ms"));
    // A few slow steps (start-up, an evaluation) would flatten the rest:
    // the axis stops at 1.5 x the 99th percentile.
    const ys = [];
    lines.forEach((l) => l.pts.forEach((p) => ys.push(p.y)));
    ys.sort((x, y) => x - y);
    const cut = ys.length ? 1.5 * ys[Math.floor(0.99 * (ys.length - 1))] : 0;
    const clipped = ys.length && ys[ys.length - 1] > cut;
    if (S.charts.stepMs) S.charts.stepMs.options.scales.y.max = clipped ? cut : undefined;
    const n = draw(S.charts.stepMs, groupLines(lines), S.ui.x);
    // Bars: per worker of the job (a run), per job (a comparison), or
    // per mode, its jobs' steps together (a comparison drawn by mode).
    const groups = [], byMode = isCompare() && S.ui.group;
    if (!isCompare()) {
      S.jobs[0].rows.forEach((_, r) =>
        groups.push({label: "worker " + r, worker: r, s: sums(S.jobs[0], r)}));
    } else {
      S.jobs.forEach((j, i) => {
        if (!shown(j)) return;
        const key = byMode ? groupOf(j) : j.label;
        let g = groups.find((x) => x.label === key);
        if (!g) {
          g = {label: key, s: {n: 0, step: 0, compute: 0, comm: 0}, jobs: 0};
          if (!byMode) g.job = i;
          groups.push(g);
        }
        g.jobs++;
        j.rows.forEach((_, r) => {
          const s = sums(j, r);
          g.s.n += s.n; g.s.step += s.step; g.s.compute += s.compute; g.s.comm += s.comm;
        });
      });
      for (let k = groups.length - 1; k >= 0; k--)
        if (!groups[k].s.n) groups.splice(k, 1);
    }
    const mean = (g, k) => g.s.n ? g.s[k] / g.s.n : 0;
    drawBars(S.charts.split, groups.map((g) => g.label), [
      {label: "compute", data: groups.map((g) => mean(g, "compute")),
        backgroundColor: "#3c78d8"},
      {label: "communication (waiting included)",
        data: groups.map((g) => mean(g, "comm")), backgroundColor: "#e8710a"},
      {label: "rest (data, injected delay)", data: groups.map((g) =>
        Math.max(0, mean(g, "step") - mean(g, "compute") - mean(g, "comm"))),
      backgroundColor: "#c6ccd8"},
    ]);
    const latest = groups.map((g) => ({label: g.label, worker: g.worker,
      job: g.job, rows: g.s.n, step_ms_mean: g.s.n ? g.s.step / g.s.n : null,
      compute_ms_mean: g.s.n ? g.s.compute / g.s.n : null,
      comm_ms_mean: g.s.n ? g.s.comm / g.s.n : null,
      utilization: g.s.step > 0 ? g.s.compute / g.s.step : null}));
    const cap = latest.map((g) => esc(g.label) + ": " +
      fmt(g.step_ms_mean, 2) + " ms a step, utilization " +
      fmt(g.utilization === null ? null : 100 * g.utilization, 1) + "%").join("; ");
    panel("panel-steptime", n + groups.length * 3, rowsOf(lines), {groups: latest},
      (cap || "no step yet") + (byMode ? " &middot; each mode's jobs together" : "") +
      " &middot; utilization: compute over step time" +
      (clipped ? " &middot; step-time axis cut at " + fmt(cut, 1) + " ms" : ""));
  }

  function renderGradNorm() {
    const lines = smooth(series(S.ui.x, col("grad_norm")));
    logY(S.charts.gnorm);
    const n = draw(S.charts.gnorm, groupLines(lines), S.ui.x);
    const fi = focusJob(), j = S.jobs[fi], lr = j && lastRow(j);
    const latest = lr ? {job: fi, worker: lr.worker, step: lr.row[col("step")],
      grad_norm: lr.row[col("grad_norm")]} : null;
    panel("panel-gradnorm", n, rowsOf(lines), latest, latest
      ? esc((isCompare() ? j.label + ", " : "") + "worker " + latest.worker +
        ": step " + latest.step + ", gradient norm " + fmt(latest.grad_norm, 4)) +
        " &middot; " + smoothNote()
      : "no step yet");
  }

  function staleSet(m) { return m === "async" || m === "ssp"; }
  function renderStaleness() {
    const per = [];
    let top = 0;
    S.jobs.forEach((j, i) => {
      const hist = [];
      j.rows.forEach((_, r) => staleOf(j, r).hist.forEach((n, s) => {
        while (hist.length <= s) hist.push(0);
        hist[s] += n;
      }));
      const p = {job: i, label: j.label, mode: j.mode, rows: j.rows.map((_, r) =>
        rowsOfFile(j, r)), idle_fraction: idle(j), hist: staleSet(j.mode) ? hist : null};
      if (p.hist) top = Math.max(top, hist.length);
      per.push(p);
    });
    const stale = per.filter((p) => p.hist && (!isCompare() || shown(S.jobs[p.job])));
    // Bars up to the staleness 99% of the gradients shown stay within,
    // the few above it in one last bar.
    const all = [];
    stale.forEach((p) => p.hist.forEach((c, s) => { all[s] = (all[s] || 0) + c; }));
    const count = all.reduce((a, c) => a + (c || 0), 0);
    let bars = top, seen = 0;
    for (let s = 0; s < all.length; s++) {
      seen += all[s] || 0;
      if (seen >= 0.99 * count) { bars = s + 1; break; }
    }
    const labels = [];
    for (let s = 0; s < bars; s++) labels.push(s === 63 ? "63+" : String(s));
    if (bars < top) labels.push(bars + "+");
    // A comparison drawn by mode: a bar series and a note per mode,
    // its jobs' gradients together and their mean idle fraction.
    const byMode = isCompare() && S.ui.group;
    const series = [];
    stale.forEach((p, k) => {
      const key = byMode ? groupOf(S.jobs[p.job]) : p.label;
      let g = series.find((x) => x.key === key);
      if (!g) {
        g = {key: key, hist: [], jobs: 0, st: styleOf(isCompare() ? p.job : k,
          S.jobs[p.job])};
        series.push(g);
      }
      g.jobs++;
      p.hist.forEach((c, i) => { g.hist[i] = (g.hist[i] || 0) + c; });
    });
    drawBars(S.charts.stale, labels, series.map((g) => {
      const data = labels.map((_, s) => s < bars ? g.hist[s] || 0
        : g.hist.slice(bars).reduce((a, c) => a + (c || 0), 0));
      return {label: !isCompare() ? "gradients" : byMode && g.jobs > 1
        ? g.key + " (" + g.jobs + " jobs)" : g.key, data: data,
      backgroundColor: g.st.color};
    }));
    $("c-stale").parentNode.hidden = stale.length === 0;
    const noteOf = (label, mode, idleF) => esc((isCompare() ? label + ": " : "") +
      (staleSet(mode) ? "" : (mode || "this mode") + ": no staleness, ") +
      "idle fraction " + fmt(idleF, 3));
    const notes = [];
    if (byMode) {
      const modes = [];
      per.forEach((p) => {
        if (!shown(S.jobs[p.job])) return;
        const key = groupOf(S.jobs[p.job]);
        let m = modes.find((x) => x.key === key);
        if (!m) modes.push(m = {key: key, mode: p.mode, idle: [], jobs: 0});
        m.jobs++;
        if (p.idle_fraction !== null) m.idle.push(p.idle_fraction);
      });
      modes.forEach((m) => notes.push(noteOf(m.key + (m.jobs > 1 ? " (mean of " +
        m.jobs + ")" : ""), m.mode, m.idle.length ? m.idle.reduce((a, b) =>
        a + b, 0) / m.idle.length : null)));
    } else {
      per.forEach((p) => notes.push(noteOf(p.label, p.mode, p.idle_fraction)));
    }
    panel("panel-staleness", stale.reduce((a, p) => a + p.hist.length, 0),
      per.reduce((a, p) => a + p.rows.reduce((x, y) => x + y, 0), 0),
      {jobs: per}, (stale.length ? "staleness of each gradient (worker-R.csv: " +
        "the largest any server saw" + (bars < top ? "; the last bar " +
        "counts those staler than 99% of them" : "") + "); " : "sync: no staleness (every gradient " +
        "is applied to the step it was computed for); ") + notes.join("; ") +
        " &middot; idle fraction: communication over step time");
  }

  // when: an event's time, since its job's start (a run), or on the clock
  // with that (a comparison, whose jobs start one after another).
  function when(e) {
    if (e.t === null || e.t === undefined) return "";
    const rel = fmt(e.t, 1) + " s";
    if (!isCompare() || !(e.at > 1e9)) return rel + ": ";
    return new Date(e.at * 1000).toLocaleTimeString() + " (" + rel + "): ";
  }

  function renderEvents() {
    const ev = [], lrc = col("lr"), sc = col("step"), wc = col("wall_s");
    let dropped = 0, lost = 0, wr = 0, sr = 0, ckpts = 0, ckptDir = false;
    const notes = [], total = [], unknown = [], nets = [];
    S.jobs.forEach((j, i) => {
      const who = isCompare() ? j.label + ": " : "";
      const at = (t) => (j.t0 || 0) + (t || 0);
      // Dropped gradients, a line per second of the job that had any:
      // the overview's latest (as [step, wall_s]) and the rows since.
      const bySec = new Map();
      const drop = (r, step, wall) => {
        const k = Math.floor(wall || 0);
        const g = bySec.get(k) || {n: 0, t: wall, lo: step, hi: step,
          workers: new Set()};
        g.n++;
        g.t = Math.max(g.t, wall);
        g.lo = Math.min(g.lo, step);
        g.hi = Math.max(g.hi, step);
        g.workers.add(r);
        bySec.set(k, g);
      };
      j.rows.forEach((_, r) => {
        const a = j.agg[r];
        if (a) {
          dropped += a.dropped;
          a.dropped_rows.forEach((x) => drop(r, x[0], x[1]));
        }
        tailRows(j, r).forEach((row) => {
          if (row[lrc] !== 0) return;
          dropped++;
          drop(r, row[sc], row[wc]);
        });
      });
      bySec.forEach((g) => ev.push({at: at(g.t), t: g.t, text: who + g.n +
        " gradient" + (g.n > 1 ? "s" : "") + " dropped (worker" +
        (g.workers.size > 1 ? "s " : " ") + Array.from(g.workers).sort()
        .join(", ") + ", step" + (g.lo === g.hi ? " " + g.lo : "s " + g.lo +
        "-" + g.hi) + ")"}));
      (j.events || []).forEach((e) => ev.push({at: at(e.t), t: e.t,
        text: who + e.what + " (" + e.total + " so far)"}));
      (j.checkpoints || []).forEach((c) => {
        ckpts++;
        ev.push({at: at(c.t), t: c.t, text: who + "checkpoint: server " +
          c.server + ", version " + c.version});
      });
      if (isCompare() && j.state !== "pending" && j.t0)
        ev.push({at: j.t0, t: 0, text: who + "started"});
      if (j.state === "finished" && j.summary && isCompare())
        ev.push({at: at(j.summary.wall_s), t: j.summary.wall_s, text: who +
          "finished (" + (j.summary.outcome || "?") + ")"});
      const c = j.counts || {};
      lost += c.workers_lost || 0;
      wr += c.worker_restarts || 0;
      sr += c.server_restarts || 0;
      if (c.source === "none" && j.state !== "pending") unknown.push(j.label || "this job");
      if (j.summary && j.summary.dropped_gradients !== null &&
          j.summary.dropped_gradients !== undefined)
        total.push((who ? j.label + " " : "") + j.summary.dropped_gradients);
      if (j.checkpointDir) ckptDir = true;
      if (j.summary && j.summary.placement && j.summary.placement !== "none") {
        const s = j.summary, hosts = Object.entries(s.hosts || {});
        // One job: each process's host; a comparison: how many hosts.
        const where = who ? hosts.length + " processes"
          : hosts.map(([p, a]) => p + " on " + a).join(", ");
        nets.push((who ? j.label + ": " : "") + s.placement + " hosts, " +
          (s.link_bits_per_s ? fmt(s.link_bits_per_s / 1e6, 0) +
            " Mbit/s links" : "links not shaped") +
          (s.link_delay_s ? ", " + fmt(s.link_delay_s * 1e3, 3) +
            " ms one way" : "") + (where ? " (" + where + ")" : ""));
      }
      if (j.summary && j.summary.checkpoint_failures > 0)
        notes.push(who + j.summary.checkpoint_failures + " checkpoint " +
          "writes failed (summary.json; the servers' logs say why)");
    });
    // Dropped in all: the jobs that dropped any, and how many did not.
    const some = total.filter((t) => !/ 0$/.test(t) && t !== "0");
    if (some.length)
      notes.push("dropped in all (summary.json, over servers): " + some.join(", ") +
        (total.length > some.length ? "; none in the " + (total.length - some.length) +
          " other job" + (total.length - some.length > 1 ? "s" : "") : ""));
    else if (total.length)
      notes.push("dropped in all (summary.json, over servers): none" +
        (total.length > 1 ? " in any of the " + total.length + " jobs" : ""));
    // In a comparison, jobs on the same hosts and links are one entry.
    if (nets.length && isCompare()) {
      const same = [];
      nets.forEach((t) => {
        const d = t.slice(t.indexOf(": ") + 2);
        const g = same.find((x) => x.d === d);
        if (g) g.jobs.push(t.slice(0, t.indexOf(": ")));
        else same.push({d: d, jobs: [t.slice(0, t.indexOf(": "))]});
      });
      notes.push("emulated hosts (summary.json's placement and link): " +
        same.map((g) => (g.jobs.length > 1 ? g.jobs.length + " jobs" : g.jobs[0]) +
          ": " + g.d).join("; "));
    } else if (nets.length) {
      notes.push("emulated hosts (summary.json's placement and link): " +
        nets.join("; "));
    }
    if (unknown.length)
      notes.push("lost and restarted processes of " + unknown.join(", ") +
        ": known when the job ends (its summary.json)");
    if (!ckptDir) notes.push("no --checkpoint-dir: no checkpoints");
    ev.sort((a, b) => b.at - a.at);
    const shown = ev.slice(0, 300);
    $("events-body").innerHTML = shown.length
      ? "<ul class=\"events\">" + shown.map((e) => "<li>" + when(e) +
        esc(e.text) + "</li>").join("") + "</ul>"
      : "<p class=\"note\">nothing yet</p>";
    panel("panel-events", ev.length, ev.length, {dropped: dropped,
      workers_lost: lost, worker_restarts: wr, server_restarts: sr,
      checkpoints: ckpts}, esc("dropped gradients " + dropped +
        " (rows with lr 0: dropped by every server), workers lost " + lost +
        ", worker restarts " + wr + ", server restarts " + sr +
        ", checkpoints " + ckpts) + (notes.length ? "<br>" +
        notes.map(esc).join("<br>") : ""));
  }

  // controls shows the reader's choices once the page knows whether it
  // shows a comparison, and keeps the mode picker's boxes one per mode.
  function controls() {
    const f = $("controls");
    if (!f) return;
    f.hidden = false;
    for (const el of f.querySelectorAll(".compare-only"))
      el.hidden = !isCompare();
    const groups = [], seeds = [];
    S.jobs.forEach((j) => {
      if (groups.indexOf(groupOf(j)) < 0) groups.push(groupOf(j));
      if (seedOf(j) && seeds.indexOf(seedOf(j)) < 0) seeds.push(seedOf(j));
    });
    if (!isCompare()) return;
    picker($("ctl-modes"), "modes", groups, S.ui.hidden,
      (g) => PALETTE[modeIndex(g) % PALETTE.length]);
    picker($("ctl-seeds"), "seeds", seeds.length > 1 ? seeds : [],
      S.ui.hiddenSeeds, () => null);
  }
  // picker keeps in box a box to tick per key (a mode, a seed): unticked,
  // hidden[key] is set and that key's jobs are left out of every chart
  // and mean.
  function picker(box, title, keys, hidden, colour) {
    if (!box || box.dataset.keys === keys.join("\n")) return;
    box.dataset.keys = keys.join("\n");
    box.innerHTML = keys.length ? title + ": " + keys.map((k) =>
      "<label><input type=\"checkbox\" data-key=\"" + esc(k) + "\"" +
      (hidden[k] ? "" : " checked") + "> <span" + (colour(k) ? " style=\"color:" +
      colour(k) + "\"" : "") + ">" + esc(k || "?") + "</span></label>").join(" ") : "";
    for (const el of box.querySelectorAll("input"))
      el.addEventListener("change", () => {
        hidden[el.dataset.key] = !el.checked;
        render();
      });
  }
  function wireControls() {
    const on = (id, ev, f) => { const el = $(id); if (el) el.addEventListener(ev, () => { f(el); render(); }); };
    on("ctl-group", "change", (el) => { S.ui.group = el.checked; });
    on("ctl-runs", "change", (el) => { S.ui.runs = el.checked; });
    on("ctl-logy", "change", (el) => { S.ui.logy = el.checked; });
    on("ctl-x", "change", (el) => { S.ui.x = el.value; });
    on("ctl-unzoom", "click", () => { S.ui.zoom = {}; });
    on("ctl-smooth", "input", (el) => {
      S.ui.smooth = Number(el.value);
      $("ctl-smooth-v").textContent = S.ui.smooth.toFixed(2);
    });
  }
  wireControls();

  function render() {
    charts();
    controls();
    $("title").textContent = S.title;
    document.title = S.title;
    renderProgress();
    renderLoss();
    renderAccuracy();
    renderStepTime();
    renderGradNorm();
    renderStaleness();
    renderEvents();
    const w = $("warning");
    if (!haveChart) {
      w.hidden = false;
      w.textContent = "Chart.js is not installed on the machine that serves " +
        "this page (Debian's libjs-chart.js, expected at " +
        (S.chartMissing || "?") + "): numbers only, no charts.";
    }
  }

  // ------------------------------------------------------------ polling
  async function poll() {
    let wait = 1000;
    try {
      const r = await fetch("data.json?" + query(), {cache: "no-store"});
      if (!r.ok) throw new Error("HTTP " + r.status);
      const more = merge(await r.json());
      S.fetches++;
      render();
      $("status").textContent = "updated " + new Date().toLocaleTimeString() +
        " (" + S.fetches + " requests; every second)";
      if (more) wait = 50;
    } catch (e) {
      $("status").textContent = "cannot reach pstrain (" + e.message +
        "): the job may have ended; trying again";
      wait = 5000;
    }
    setTimeout(poll, wait);
  }
  poll();
})();
