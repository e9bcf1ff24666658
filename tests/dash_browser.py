# tests/dash_browser.py - the dashboard page in headless Chromium, through
# Debian's chromium-driver and python3-selenium (no download at any time):
# what tests/dash_browser_test.sh checks, one function per case, and
# `shot URL FILE` for a screenshot (docs/dashboard.png). Each case prints
# "ok NAME" or "FAIL NAME: why".
#
#   python3 tests/dash_browser.py run URL DIR CKPT SHOTDIR
#   python3 tests/dash_browser.py compare-live URL SHOTDIR
#   python3 tests/dash_browser.py compare-done URL CMPDIR SHOTDIR [COPY]
#   python3 tests/dash_browser.py many URL CMPDIR LABEL,LABEL,... SEEDS
#   python3 tests/dash_browser.py shot URL FILE [WIDTH HEIGHT]
#
# URL may be @LOG: Chromium starts first and says so by creating
# LOG.browser; then the address is read from LOG once the job prints it.
# A test starts its job only after that file exists, so a slow start of
# Chromium on a busy machine does not eat into the job's running time.
# Every wait is for an event, with a deadline of DEADLINE seconds.
import csv
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains

PANELS = ["progress", "loss", "accuracy", "steptime", "gradnorm",
          "staleness", "events"]


def browser(width=1300, height=1900):
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="pt-chromium-")
    # Without the background-networking flags Chromium dials out at start
    # (updates, sync), which a closed network refuses.
    for a in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
              "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync",
              "--user-data-dir=" + profile,
              "--window-size=%d,%d" % (width, height)]:
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
    d.pt_profile = profile
    return d


def close(d):
    """Quits Chromium and removes the profile it was given."""
    d.quit()
    shutil.rmtree(d.pt_profile, ignore_errors=True)


def console(d):
    """The console's warnings and errors since the last call."""
    return [e for e in d.get_log("browser")
            if e["level"] in ("SEVERE", "WARNING")]


def panel(d, name):
    e = d.find_element("id", "panel-" + name)
    latest = e.get_attribute("data-latest")
    return {"points": int(e.get_attribute("data-points") or 0),
            "rows": int(e.get_attribute("data-rows") or 0),
            "latest": json.loads(latest) if latest else None,
            "shown": e.is_displayed(),
            "caption": e.find_element("class name", "caption").text}


DEADLINE = 120.0


def address(url):
    """url itself, or for @LOG the address LOG prints, once it does."""
    if not url.startswith("@"):
        return url
    log = url[1:]
    open(log + ".browser", "w").close()
    end = time.time() + DEADLINE
    while time.time() < end:
        if os.path.exists(log):
            m = re.search(r"dashboard.* at (http://127\.0\.0\.1:\d+/)",
                          open(log).read())
            if m:
                return m.group(1)
        time.sleep(0.05)
    raise AssertionError("no dashboard address in " + log)


def wait_for(d, cond, timeout=DEADLINE):
    end = time.time() + timeout
    while time.time() < end:
        try:
            v = cond(d)
            if v:
                return v
        except Exception:
            pass
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path + " is not a PNG"
    return data


def csv_rows(path):
    return list(csv.DictReader(open(path)))


def near(a, b):
    return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(b)))


def case(name, fn, *args):
    try:
        fn(*args)
        print("ok " + name, flush=True)
        return True
    except Exception as e:
        print("FAIL %s: %r" % (name, e), flush=True)
        return False


def every_panel(d):
    for p in PANELS:
        info = panel(d, p)
        assert info["shown"], p + " not shown"
        assert info["caption"], p + " has no caption"
    canvases = d.find_elements("tag name", "canvas")
    assert len(canvases) == 8, len(canvases)


# ---------------------------------------------------------------- a run
def check_run(url, out, ck, shots):
    d = browser()
    try:
        d.get(address(url))
        wait_for(d, lambda d: panel(d, "loss")["rows"] >= 60 and
                 panel(d, "accuracy")["latest"])
        errs = console(d)
        assert not errs, errs
        every_panel(d)
        early = {p: panel(d, p) for p in PANELS}
        d.save_screenshot(shots + "/early.png")
        # The numbers shown are the job's: worker 0's latest step and
        # loss a row of worker-0.csv, the latest evaluation a row of
        # eval.csv, idle fraction and staleness histogram those of the
        # rows the page holds.
        lat = early["loss"]["latest"]
        rows0 = csv_rows(out + "/worker-0.csv")
        assert lat["worker"] == 0, lat
        assert any(near(r["step"], lat["step"]) and near(r["loss"], lat["loss"])
                   for r in rows0), lat
        acc = early["accuracy"]["latest"]
        assert acc["set"] == "validation", acc
        assert any(near(r["step"], acc["step"]) and near(r["val_acc"], acc["acc"])
                   for r in csv_rows(out + "/eval.csv")), acc
        st = early["staleness"]["latest"]["jobs"][0]
        comm = step = 0.0
        hist = {}
        for w, n in enumerate(st["rows"]):
            for r in csv_rows("%s/worker-%d.csv" % (out, w))[:n]:
                comm += float(r["comm_ms"])
                step += float(r["step_ms"])
                s = min(63, int(float(r["staleness"])))
                hist[s] = hist.get(s, 0) + 1
        assert abs(st["idle_fraction"] - comm / step) < 1e-6, (st, comm / step)
        assert st["hist"] == [hist.get(s, 0) for s in range(len(st["hist"]))], \
            (st["hist"], hist)
        groups = early["steptime"]["latest"]["groups"]
        assert [g["worker"] for g in groups] == [0, 1], groups
        for g in groups:
            assert 0 < g["utilization"] < 1, g
        prog = early["progress"]["latest"]["jobs"][0]
        assert prog["state"] == "running" and prog["steps"] == 2500, prog
        assert prog["eta_s"] > 0, prog
        ev = early["events"]["latest"]
        files = glob.glob(ck + "/server-*-v*.ckpt")
        assert ev["checkpoints"] <= len(files), (ev, files)
        assert ev["workers_lost"] == 0, ev
        # Later: more rows, a newer step drawn, and a screenshot that
        # shows them. The drawn points are not compared: the page thins
        # each series to about 800 points (every k-th), so their count
        # drops whenever k steps up.
        wait_for(d, lambda d: panel(d, "loss")["rows"] >=
                 early["loss"]["rows"] + 300 and all(
                     panel(d, p)["rows"] > early[p]["rows"]
                     for p in ("gradnorm", "steptime")))
        late = {p: panel(d, p) for p in PANELS}
        # The canvas shows the newer rows once it is painted again: on a
        # busy machine that can take a moment after the DOM has them.
        wait_for(d, lambda d: d.save_screenshot(shots + "/late.png") and
                 png(shots + "/early.png") != png(shots + "/late.png"))
        for p in ("loss", "gradnorm", "steptime"):
            assert late[p]["rows"] > early[p]["rows"], p
            assert late[p]["points"] > 0, (p, late[p]["points"])
        assert late["loss"]["latest"]["step"] > lat["step"], \
            (late["loss"]["latest"], lat)
        assert png(shots + "/early.png") != png(shots + "/late.png"), \
            "the late screenshot is the early one"
        assert late["events"]["latest"]["checkpoints"] >= 1, late["events"]
        errs = console(d)
        assert not errs, errs
        print("early %d points, late %d" % (early["loss"]["points"],
              late["loss"]["points"]))
    finally:
        close(d)


# ---------------------------------------------------------------- compare
def check_compare_live(url, shots):
    d = browser()
    try:
        d.get(address(url))
        p = wait_for(d, lambda d: (lambda p: p if any(
            j["state"] == "running" and j["step"] > 0 for j in p["jobs"])
            else None)(panel(d, "progress")["latest"]))
        labels = [j["label"] for j in p["jobs"]]
        assert labels == ["sync/seed-1", "async/seed-1"], labels
        head = [th.text for th in d.find_elements(
            "css selector", "#panel-progress table.modes th")]
        assert "sync" in head and "async" in head, head
        every_panel(d)
        # The second job running too, next to the first's curves.
        wait_for(d, lambda d: panel(d, "progress")["latest"]["jobs"][1]
                 ["state"] == "running" and panel(d, "loss")["latest"]
                 ["job"] == 1)
        # Grouped (the default): a mean line per mode, named by the mode
        # (one seed each); with "every run" ticked, the jobs' lines too.
        lines = labelled(d, "c-loss-step")
        assert lines == ["sync", "async"], lines
        d.find_element("id", "ctl-runs").click()
        wait_for(d, lambda d: labelled(d, "c-loss-step")[2:] == labels)
        d.find_element("id", "ctl-runs").click()
        d.save_screenshot(shots + "/compare-live.png")
        errs = console(d)
        assert not errs, errs
    finally:
        close(d)


def check_compare_done(url, cmp, shots, copy=None):
    d = browser()
    try:
        d.get(url)
        p = wait_for(d, lambda d: (lambda p: p if p and len(p["jobs"]) == 2
                     and all(j["state"] == "finished" for j in p["jobs"])
                     else None)(panel(d, "progress")["latest"]))
        every_panel(d)
        for j in p["jobs"]:
            assert j["state"] == "finished" and j["step"] == j["steps"], j
        # Every row of each job is drawn from: the loss panel holds
        # worker 0's rows of both jobs.
        want = sum(len(csv_rows("%s/%s/worker-0.csv" % (cmp, j["label"])))
                   for j in p["jobs"])
        assert panel(d, "loss")["rows"] == want, (panel(d, "loss")["rows"], want)
        st = panel(d, "staleness")["latest"]["jobs"]
        assert st[0]["hist"] is None and st[1]["hist"], st
        d.save_screenshot(shots + "/compare-done.png")
        if copy:
            d.save_screenshot(copy)
        errs = console(d)
        assert not errs, errs
    finally:
        close(d)


def labelled(d, chart):
    """The labels of chart's datasets that have one (bands have none)."""
    return d.execute_script(
        "return Chart.getChart(arguments[0]).data.datasets.filter("
        "(s) => s.label).map((s) => s.label)", chart)


def legend(d, chart):
    """The entries chart's legend shows."""
    return d.execute_script(
        "return Chart.getChart(arguments[0]).legend.legendItems.map("
        "(i) => i.text)", chart)


def check_many(url, cmp, modes, seeds):
    """pstrain dashboard on a folder of many jobs (modes x seeds), each
    file read as an overview of 4 points a line: each mode drawn as its
    mean with a band of ± sd, step time summed by mode over every row,
    the mode picker hides a mode, every run shows the jobs (not in the
    legend), the seed picker, log y, no smoothing draws each job's
    lowest loss, x in examples, and a drag zooms."""
    d = browser()
    try:
        d.get(url + "?points=4")
        n = len(modes) * seeds
        p = wait_for(d, lambda d: (lambda p: p if p and len(p["jobs"]) == n
                     and all(j["state"] == "finished" for j in p["jobs"])
                     else None)(panel(d, "progress")["latest"]))
        # Only what is drawn was loaded: fewer rows than each file has.
        for j in p["jobs"]:
            assert 0 < j["held"] < j["rows"] == 20, j
        want = ["%s (mean ± sd of %d)" % (m, seeds) for m in modes]
        wait_for(d, lambda d: labelled(d, "c-loss-step") == want)
        for c in ("c-loss-time", "c-acc-step", "c-acc-time", "c-gnorm",
                  "c-step-ms"):
            assert labelled(d, c) == want, (c, labelled(d, c))
        # Step time by mode: a bar and a caption entry per mode, not 21.
        st = panel(d, "steptime")["latest"]["groups"]
        assert [g["label"] for g in st] == modes, st
        assert all(g["rows"] == seeds * 2 * 20 for g in st), st
        fills = d.execute_script(
            "return Chart.getChart('c-loss-step').data.datasets.map("
            "(s) => s.fill)")
        assert fills.count("-1") == len(modes), fills
        # The configuration of every job, from its summary.json.
        cells = d.find_elements("css selector",
                                "#panel-progress table.jobs tr[data-job]")
        assert len(cells) == n, len(cells)
        row = [td.text for td in cells[0].find_elements("tag name", "td")]
        assert row[2] == "0.2" and row[3] == "32" and row[4] == "sgd", row
        # The picker: unticking the first mode takes its lines away.
        boxes = d.find_elements("css selector", "#ctl-modes input")
        assert len(boxes) == len(modes), len(boxes)
        boxes[0].click()
        wait_for(d, lambda d: labelled(d, "c-loss-step") == want[1:])
        boxes[0].click()
        # The seed picker: without seed 1 each mean is of the others.
        seed1 = d.find_element("css selector",
                               "#ctl-seeds input[data-key='seed 1']")
        seed1.click()
        wait_for(d, lambda d: labelled(d, "c-loss-step") == [
            "%s (mean ± sd of %d)" % (m, seeds - 1) for m in modes])
        seed1.click()
        wait_for(d, lambda d: labelled(d, "c-loss-step") == want)
        d.find_element("id", "ctl-runs").click()
        wait_for(d, lambda d: len(labelled(d, "c-loss-step")) ==
                 len(modes) + n)
        assert legend(d, "c-loss-step") == want, legend(d, "c-loss-step")
        d.find_element("id", "ctl-logy").click()
        wait_for(d, lambda d: d.execute_script(
            "return Chart.getChart('c-loss-step').options.scales.y.type")
            == "logarithmic")
        # No smoothing: each job's line reaches the lowest loss of its
        # worker-0.csv (thinning keeps each run's lowest and highest).
        d.execute_script("const e = document.getElementById('ctl-smooth');"
                         "e.value = 0; e.dispatchEvent(new Event('input'));")
        got = wait_for(d, lambda d: d.execute_script(
            "const s = Chart.getChart('c-loss-step').data.datasets.filter("
            "(s) => s.label && s.label.indexOf('mean') < 0);"
            "return s.length ? s.map((s) => [s.label, Math.min(...s.data.map("
            "(p) => p.y))]) : null"))
        for label, low in got:
            rows = csv_rows("%s/%s/worker-0.csv" % (cmp, label))
            assert near(low, min(float(r["loss"]) for r in rows)), (label, low)
        # x in examples: each job's last point is where its workers had
        # processed between 20 and 40 steps of 16 examples.
        d.find_element("css selector", "#ctl-x option[value=examples]").click()
        wait_for(d, lambda d: d.execute_script(
            "return Chart.getChart('c-loss-step').options.scales.x.title.text")
            == "examples processed (all workers)")
        ends = d.execute_script(
            "return Chart.getChart('c-loss-step').data.datasets.filter("
            "(s) => s.ptFaint).map((s) => s.data[s.data.length - 1].x)")
        assert len(ends) == n and all(320 <= x <= 640 for x in ends), ends
        # A drag across the seconds chart shows that range of seconds.
        c = d.find_element("id", "c-loss-time")
        ActionChains(d).move_to_element_with_offset(c, -60, 0) \
            .click_and_hold().move_by_offset(100, 0).release().perform()
        lo, hi = wait_for(d, lambda d: d.execute_script(
            "const x = Chart.getChart('c-loss-time').options.scales.x;"
            "return x.min !== undefined ? [x.min, x.max] : null"))
        inside = d.execute_script(
            "return Chart.getChart('c-loss-time').data.datasets.map((s) =>"
            "s.data.slice(1, -1).every((p) => p.x >= arguments[0] &&"
            "p.x <= arguments[1]))", lo, hi)
        assert 0 <= lo < hi and all(inside), (lo, hi, inside)
        ActionChains(d).double_click(c).perform()
        wait_for(d, lambda d: d.execute_script(
            "return Chart.getChart('c-loss-time').options.scales.x.min"
            " === undefined"))
        d.save_screenshot(cmp + "/many.png")
        errs = console(d)
        assert not errs, errs
    finally:
        close(d)


def shot(url, path, width=1300, height=1900):
    d = browser(int(width), int(height))
    try:
        d.get(url)
        time.sleep(3)
        d.save_screenshot(path)
    finally:
        close(d)


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    if what == "run":
        case("test_dash_browser_run", check_run, *args)
    elif what == "compare-live":
        case("test_dash_browser_compare_live", check_compare_live, *args)
    elif what == "compare-done":
        case("test_dash_browser_compare_done", check_compare_done, *args)
    elif what == "many":
        url, cmp, modes, seeds = args
        case("test_dash_browser_many", check_many, url, cmp,
             modes.split(","), int(seeds))
    elif what == "shot":
        shot(*args)
    else:
        sys.exit("unknown: " + what)
