"""The HTML report in headless Chromium: stepprof writes the pages, tests/browser/check_report.mjs
opens each in Debian's /usr/bin/chromium (through playwright-core; no browser is downloaded)
and fails on a JavaScript error, a console error, a dialog (alert), a network request, a
missing or blank chart, or an injected script or handler. Screenshots go to
$STEPPROF_TEST_OUT (CTest: <build>/tests/browser/)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import fixtures as fx  # noqa: E402

BIN = os.environ["STEPPROF_BIN"]
NODE = os.environ.get("STEPPROF_NODE") or shutil.which("node")
MODULES = os.environ["STEPPROF_WEB_MODULES"]
OUT = Path(os.environ.get("STEPPROF_TEST_OUT", "browser-out"))
CHECK = fx.SRC / "tests/browser/check_report.mjs"
CHROMIUM = os.environ.get("STEPPROF_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module", autouse=True)
def browser_present():
    # Not a skip: the test profile of scripts/install-deps.sh installs chromium, and CI must run this.
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run scripts/install-deps.sh test"
    OUT.mkdir(parents=True, exist_ok=True)


def page(name, *args):
    out = OUT / f"{name}.html"
    r = subprocess.run([BIN, "html", *map(str, args), "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out


def check(html, expect, texts=(), extra=()):
    cmd = [NODE, str(CHECK), "--modules", MODULES, "--html", str(html), "--screenshot", str(html.with_suffix(".png")),
           "--expect", ",".join(expect)]
    for t in texts:
        cmd += ["--text", t]
    r = subprocess.run([*cmd, *extra], capture_output=True, text=True, timeout=240)
    return r


def passes(html, expect, texts=()):
    r = check(html, expect, texts)
    assert r.returncode == 0, r.stderr + r.stdout
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["problems"] == []
    assert html.with_suffix(".png").stat().st_size > 10_000
    return result


def test_real_log_with_nesting():
    html = page("real", "--hierarchy", fx.HIER, fx.LOG)
    result = passes(html, ["update-time", "regions", "paths-0", "padding", "whatif"],
                    ["vggt_single", "7. Findings", "8. What if"])
    assert all(c["width"] > 500 and c["height"] > 200 for c in result["charts"])


def test_real_log_without_nesting():
    passes(page("flat", fx.LOG), ["update-time", "regions", "padding"])


def test_four_ranks_with_heatmaps():
    d = OUT / "four-ranks"
    d.mkdir(exist_ok=True)
    html = page("four-ranks", "--hierarchy", fx.HIER, *fx.write_multi_rank(d))
    passes(html, ["update-time", "heatmap-update_ms", "heatmap-outside_comm_ms", "regions", "paths-0", "padding",
                  "whatif"], ["rank 2"])


def test_heatmaps_of_300_ranks_in_groups_of_ranks():
    # Beyond 256 ranks a heatmap row is a group of consecutive ranks (here 2); the page
    # says so in its header.
    d = OUT / "300-ranks"
    r = subprocess.run([BIN, "synth", "-o", str(d), "--ranks", "300", "--updates", "3", "--straggler", "77:1:3:1.8"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    html = page("300-ranks", "--no-whatif", d)
    passes(html, ["update-time", "heatmap-update_ms", "heatmap-outside_comm_ms", "regions", "paths-0", "padding"],
           ["Each heatmap row is 2 consecutive ranks"])


def test_hostile_names_stay_text():
    d = OUT / "hostile"
    d.mkdir(exist_ok=True)
    html = page("hostile", fx.write_hostile(d))
    # The checker fails on any alert dialog, extra script or on* attribute.
    passes(html, ["update-time", "regions", "paths-0", "padding", "whatif"], [fx.SCRIPT, fx.IMG, fx.HOSTILE_FILE])


def test_a_nesting_that_names_none_of_the_regions_draws_every_other_chart():
    # The regions chart had no level to stack and threw; every chart after it stayed empty.
    d = OUT / "foreign-nesting"
    d.mkdir(exist_ok=True)
    (d / "nesting.txt").write_text("foo\n  bar\n")
    html = page("foreign-nesting", "--hierarchy", d / "nesting.txt", fx.LOG)
    assert 'data-chart="regions"' not in html.read_text()
    passes(html, ["update-time", "padding"])  # (no what-if: nothing of the nesting ran)


def test_profiler_traces_of_one_step_each_show_it_inside_the_plot():
    # Eight ranks' traces of one step each (PARAM's DLRM): the update-time chart's axis was
    # fitted to the data, from 6 to 10, with every rank's point on its right edge.
    traces = sorted((fx.SRC / "examples/kineto").glob("param-dlrm-8rank-v100-worker*_step_12.json.gz"))
    assert len(traces) == 8
    html = page("dlrm-one-step", "--no-whatif", *traces)
    passes(html, ["update-time", "heatmap-update_ms", "heatmap-outside_comm_ms", "regions"])


def test_the_checker_catches_a_broken_page():
    good = page("real", "--hierarchy", fx.HIER, fx.LOG).read_text()
    broken = {
        "js-error": good.replace("<main>", '<main><div class="chart" data-chart="no-such-chart"></div>', 1),
        "no-script": good[:good.rindex("<script>")] + "</body></html>\n",
        "injected": good.replace("<main>", "<main><img src=x onerror=alert(1)>", 1),
    }
    for name, text in broken.items():
        f = OUT / f"broken-{name}.html"
        f.write_text(text)
        r = check(f, ["update-time", "regions", "paths-0", "padding", "whatif"])
        assert r.returncode == 1, (name, r.stdout, r.stderr)
        assert "check_report:" in r.stderr
