// Opens a stepprof HTML report in headless Chromium (Debian's /usr/bin/chromium, driven
// by playwright-core; no browser is downloaded) and fails on anything wrong:
//   - a JavaScript error (pageerror), a console error or warning, a dialog (alert,
//     confirm, prompt), or any network request (the page must be self-contained);
//   - a chart element ([data-chart]) without a drawn canvas of non-zero size, or a
//     canvas with nothing drawn on it; the set of charts differs from --expect;
//   - a <script> other than the two the page is written with, or an on* attribute;
//   - with --text: a string that is not in the page's visible text.
// It opens every chart's tooltip and tries every option of every <select> on the way.
// Saves a full-page screenshot (--screenshot) and, with --clip-from ID, a screenshot of
// --clip-height pixels from the top of the element with that id (for the README).
//
// usage: node check_report.mjs --modules DIR/node_modules --html FILE --screenshot FILE.png
//          [--expect a,b,c] [--text STRING]... [--clip-from ID --clip-height N --clip-out FILE.png]
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

function args() {
  const out = { text: [] };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (key === 'text') out.text.push(argv[i + 1]);
    else out[key] = argv[i + 1];
  }
  for (const required of ['modules', 'html', 'screenshot']) {
    if (!out[required]) {
      console.error(`check_report: --${required} is required`);
      process.exit(2);
    }
  }
  return out;
}

const opt = args();
const require = createRequire(path.join(path.resolve(opt.modules), '..', 'package.json'));
const { chromium } = require('playwright-core');

const problems = [];
const browser = await chromium.launch({
  executablePath: process.env.STEPPROF_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const url = pathToFileURL(path.resolve(opt.html)).href;
  page.on('pageerror', (e) => problems.push(`JavaScript error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('dialog', async (d) => {
    problems.push(`a ${d.type()} dialog opened: ${JSON.stringify(d.message())}`);
    await d.dismiss();
  });
  page.on('request', (r) => {
    if (r.url() !== url && !r.url().startsWith('data:')) problems.push(`network request: ${r.url()}`);
  });
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForTimeout(300);

  // Every chart drawn: a canvas with a size and with pixels that are not all blank.
  const charts = await page.evaluate(() => [...document.querySelectorAll('[data-chart]')].map((el) => {
    const canvas = el.querySelector('canvas');
    let painted = 0;
    if (canvas && canvas.width > 0 && canvas.height > 0) {
      const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 3; i < px.length; i += 4 * 7) if (px[i] !== 0) painted += 1;
    }
    const box = el.getBoundingClientRect();
    return { name: el.dataset.chart, width: box.width, height: box.height, canvas: Boolean(canvas),
      canvasWidth: canvas ? canvas.width : 0, canvasHeight: canvas ? canvas.height : 0, painted };
  }));
  for (const c of charts) {
    if (!c.canvas) problems.push(`chart ${c.name}: no canvas`);
    else if (c.canvasWidth === 0 || c.canvasHeight === 0 || c.width === 0 || c.height === 0)
      problems.push(`chart ${c.name}: zero size`);
    else if (c.painted < 100) problems.push(`chart ${c.name}: nothing drawn (${c.painted} painted samples)`);
  }
  if (opt.expect !== undefined) {
    const want = opt.expect.split(',').filter(Boolean).sort();
    const got = charts.map((c) => c.name).sort();
    if (JSON.stringify(want) !== JSON.stringify(got))
      problems.push(`charts: expected ${JSON.stringify(want)}, found ${JSON.stringify(got)}`);
  }

  // Nothing injected: only the data block and the bundled script, no inline handlers.
  const dom = await page.evaluate(() => ({
    scripts: [...document.scripts].map((s) => s.type || 'classic'),
    handlers: [...document.querySelectorAll('*')].flatMap((el) => [...el.attributes]
      .filter((a) => a.name.toLowerCase().startsWith('on')).map((a) => `${el.tagName}[${a.name}]`)),
    text: document.body.innerText,
    title: document.title,
  }));
  if (JSON.stringify(dom.scripts) !== JSON.stringify(['application/json', 'classic']))
    problems.push(`scripts: expected the data block and the bundled script, found ${JSON.stringify(dom.scripts)}`);
  if (dom.handlers.length) problems.push(`inline event handlers: ${dom.handlers.join(', ')}`);
  for (const t of opt.text) {
    if (!dom.text.includes(t) && !dom.title.includes(t)) problems.push(`text not shown: ${JSON.stringify(t)}`);
  }

  // The page as it first shows, before any interaction (for the README).
  if (opt['clip-from']) {
    const top = await page.evaluate((id) => document.getElementById(id).getBoundingClientRect().top + window.scrollY,
      opt['clip-from']);
    await page.screenshot({ path: opt['clip-out'], fullPage: true,
      clip: { x: 0, y: Math.max(0, top - 8), width: 1280, height: Number(opt['clip-height'] || 1400) } });
  }

  // A value x axis whose data hold one x (one step) shows it away from the plot's edges:
  // an axis fitted to the data put the only point on the right edge, half of it cut off.
  const edges = await page.evaluate(() => {
    const out = [];
    if (!window.stepprofCharts) return out;
    for (const [name, chart] of window.stepprofCharts.entries()) {
      const option = chart.getOption();
      if (!option.xAxis || !option.xAxis[0] || option.xAxis[0].type !== 'value') continue;
      const xs = new Set(option.series.flatMap((s) => (s.data || []).map((d) => (Array.isArray(d) ? d[0] : d))));
      if (xs.size !== 1) continue;
      const [x] = xs;
      const at = chart.convertToPixel({ xAxisIndex: 0 }, x);
      const rect = chart.getModel().getComponent('grid', 0).coordinateSystem.getRect();
      const margin = rect.width * 0.05;
      if (!(at > rect.x + margin && at < rect.x + rect.width - margin))
        out.push(`chart ${name}: its one step (${x}) is drawn at the edge of the plot (x ${Math.round(at)} of ` +
          `${Math.round(rect.x)} to ${Math.round(rect.x + rect.width)})`);
    }
    return out;
  });
  problems.push(...edges);

  // Tooltips (they build HTML from names) and every option of every selector.
  const tips = async () => page.evaluate(() => {
    if (!window.stepprofCharts) return false;
    for (const chart of window.stepprofCharts.values()) {
      const option = chart.getOption();
      option.series.forEach((_, seriesIndex) => chart.dispatchAction({ type: 'showTip', seriesIndex, dataIndex: 0 }));
      chart.dispatchAction({ type: 'showTip', seriesIndex: 0, dataIndex: 1 });
    }
    return true;
  });
  if (!(await tips())) problems.push('the chart script did not finish (window.stepprofCharts missing)');
  const selects = await page.$$('select');
  for (const select of selects) {
    const values = await select.$$eval('option', (os) => os.map((o) => o.value));
    for (const v of values) {
      await select.selectOption(v);
      await tips();
    }
    if (values.length) await select.selectOption(values[values.length - 1]);
  }
  await page.waitForTimeout(200);

  await page.screenshot({ path: opt.screenshot, fullPage: true });
  console.log(JSON.stringify({ html: opt.html, charts, screenshot: opt.screenshot, problems }));
} finally {
  await browser.close();
}
if (problems.length) {
  for (const p of problems) console.error(`check_report: ${opt.html}: ${p}`);
  process.exit(1);
}
