(function () {
  'use strict';
  var DATA = JSON.parse(document.getElementById('gl-data').textContent);
  var KINDS = DATA.kinds, TLS = DATA.timelines, STATES = DATA.states, RINGS = DATA.rings;
  var COLORS = { load: '#4e79a7', mma: '#2ca25f', epilogue: '#9467bd', store: '#17a2b8',
                 wait: '#e8590c', issue: '#343a40', idle: '#ced4da', softmax: '#d4a017' };
  var KIND_TEXT = { load: 'TMA load in flight', mma: 'tensor core (wgmma)', epilogue: 'epilogue (regs \u2192 SMEM)',
                    store: 'TMA store', wait: 'waiting on an mbarrier', issue: 'issue', idle: 'idle',
                    softmax: 'softmax on the CUDA cores (exp2, max, sum, rescale)' };
  var LABEL_W = 150, TC_H = 12, ROW_H = 17, ISSUE_H = 4, WAIT_H = 7, PAD = 3, AXIS_H = 22, STARTUP_NS = 6000;
  var SPAN = { lane: 0, kind: 1, t0: 2, t1: 3, stage: 4, phase: 5, bar: 6, tile: 7, k: 8, cta: 9, label: 10 };
  var st = { sel: { a: DATA.defaults[0], b: DATA.defaults[1] }, target: 'a', t0: 0, dt: 1, ev: 0, timer: null };

  function $(id) { return document.getElementById(id); }
  function esc(s) {
    return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  }
  function fmtNs(ns) {
    if (ns === null || ns === undefined || isNaN(ns)) return '\u2013';
    if (Math.abs(ns) < 1000) return ns.toFixed(0) + ' ns';
    return (ns / 1000).toFixed(Math.abs(ns) < 10000 ? 2 : 1) + ' \u00b5s';
  }
  function pct(x) { return (100 * x).toFixed(1) + '%'; }
  function kindName(tl, s) { return KINDS[s[SPAN.kind]]; }
  function barName(tl, s) {
    if (s[SPAN.bar] === null || s[SPAN.bar] === undefined) return null;
    return tl.bars[s[SPAN.bar]];
  }
  function short(tl) {
    var w = tl.meta && tl.meta.what_if && tl.title.indexOf(tl.meta.what_if) < 0 ? ' \u00b7 ' + tl.meta.what_if : '';
    return '[' + tl.source + '] ' + tl.title + w;
  }

  // ---------------------------------------------------------------- layout
  function layout(ti) {
    var tl = TLS[ti];
    if (tl._lay) return tl._lay;
    var nl = tl.lanes.length, perLane = [], rows = new Array(tl.spans.length), nrows = [];
    var i, l, tmin = Infinity, tmax = -Infinity;
    for (l = 0; l < nl; l++) perLane.push([]);
    for (i = 0; i < tl.spans.length; i++) {
      var s = tl.spans[i], k = KINDS[s[SPAN.kind]];
      if (s[SPAN.t0] < tmin) tmin = s[SPAN.t0];
      if (s[SPAN.t1] > tmax) tmax = s[SPAN.t1];
      if (k !== 'wait' && k !== 'issue') perLane[s[SPAN.lane]].push(i);
    }
    for (l = 0; l < nl; l++) {
      var idx = perLane[l].sort(function (x, y) { return tl.spans[x][SPAN.t0] - tl.spans[y][SPAN.t0]; });
      var ends = [];
      for (var j = 0; j < idx.length; j++) {
        var sp = tl.spans[idx[j]], placed = -1;
        for (var r = 0; r < ends.length; r++) { if (ends[r] <= sp[SPAN.t0] + 1e-9) { placed = r; break; } }
        if (placed < 0) { ends.push(0); placed = ends.length - 1; }
        ends[placed] = Math.max(sp[SPAN.t1], sp[SPAN.t0]);
        rows[idx[j]] = placed;
      }
      nrows.push(Math.max(1, Math.min(ends.length, 6)));
    }
    var rowH = [];
    for (l = 0; l < nl; l++) rowH.push(/\/tma$/.test(tl.lanes[l]) && nrows[l] > 2 ? 11 : ROW_H);
    // the tensor core of each CTA: the union of its lanes' wgmma spans
    var tcIv = {}, tcRows = [];
    for (i = 0; i < tl.spans.length; i++) {
      var sm = tl.spans[i];
      if (KINDS[sm[SPAN.kind]] !== 'mma') continue;
      var cn = tl.lanes[sm[SPAN.lane]].split('/')[0];
      (tcIv[cn] = tcIv[cn] || []).push([sm[SPAN.t0], sm[SPAN.t1]]);
    }
    Object.keys(tcIv).forEach(function (cn) {
      var iv = tcIv[cn].sort(function (a, b) { return a[0] - b[0]; }), out = [];
      iv.forEach(function (x) { if (out.length && x[0] <= out[out.length - 1][1]) out[out.length - 1][1] = Math.max(out[out.length - 1][1], x[1]); else out.push([x[0], x[1]]); });
      tcIv[cn] = out;
    });
    var y = AXIS_H, laneY = [], laneH = [], prevCta = null;
    for (l = 0; l < nl; l++) {
      var cta = tl.lanes[l].split('/')[0];
      if (prevCta !== null && cta !== prevCta) y += 8;
      if (cta !== prevCta && tcIv[cta]) { tcRows.push({ cta: cta, y: y, iv: tcIv[cta] }); y += TC_H + 1; }
      prevCta = cta;
      var h = PAD * 2 + ISSUE_H + nrows[l] * rowH[l] + WAIT_H;
      laneY.push(y); laneH.push(h); y += h + 1;
    }
    if (!isFinite(tmin)) { tmin = 0; tmax = 1; }
    // hand-offs keyed by (dst lane, release time) for event descriptions
    var hoKey = {};
    for (i = 0; i < tl.handoffs.length; i++) {
      var h2 = tl.handoffs[i];
      hoKey[h2[4] + '|' + h2[6].toFixed(1)] = i;
    }
    tl._lay = { tcRows: tcRows, rows: rows, nrows: nrows, rowH: rowH, laneY: laneY, laneH: laneH, height: y + 4, tmin: tmin, tmax: tmax, hoKey: hoKey };
    return tl._lay;
  }

  function shown() {
    var out = [];
    ['a', 'b'].forEach(function (p) { if (st.sel[p] >= 0) out.push(st.sel[p]); });
    return out;
  }
  function extent() {
    var lo = Infinity, hi = -Infinity;
    shown().forEach(function (ti) { var L = layout(ti); lo = Math.min(lo, L.tmin); hi = Math.max(hi, L.tmax); });
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    return [Math.min(lo, 0), hi];
  }

  // ---------------------------------------------------------------- drawing
  function niceStep(x) {
    var p = Math.pow(10, Math.floor(Math.log(x) / Math.LN10)), m = x / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }
  function spanText(tl, s, w) {
    var k = KINDS[s[SPAN.kind]];
    if (w < 26 || k === 'wait' || k === 'issue') return '';
    if (k === 'mma') {
      var am = /^(Q K\^T|P V) block (\d+)/.exec(s[SPAN.label] || '');  // attention: which MMA of which block
      if (am) return (am[1] === 'P V' ? 'PV ' : 'QK\u1d40 ') + am[2];
      return (w > 60 ? 'wgmma ' : '') + 'k' + s[SPAN.k];
    }
    if (k === 'load') {
      var m = /^TMA (\S+(?: half \d+)?) /.exec(s[SPAN.label] || ''), pc = m ? m[1].replace(' half ', '\u00bd') + ' ' : '';
      if (s[SPAN.k] === null) return pc;
      return (w > 70 ? pc + 'k' + s[SPAN.k] + '\u2192s' + s[SPAN.stage] : (w > 40 ? pc : '') + 'k' + s[SPAN.k]);
    }
    if (k === 'epilogue') return w > 50 ? 'epilogue' : 'epi';
    if (k === 'store') return w > 50 ? 'TMA store' : 'st';
    if (k === 'softmax') return (w > 70 ? 'softmax ' : 'sm ') + (s[SPAN.k] === null ? '' : s[SPAN.k]);
    return k;
  }

  function roleNote(r) {
    if (r === 'producer') return ' \u00b7 TMA warp';
    if (/^consumer/.test(r)) return ' \u00b7 wgmma warpgroup';
    if (r === 'writeback') return ' \u00b7 TMA-store warp';
    if (r === 'team') return ' \u00b7 all jobs in turn';
    if (r === 'tma') return ' \u00b7 bytes in flight';
    return '';
  }
  function curEvent() {
    var ti = st.sel[st.target];
    if (ti < 0) return null;
    var ev = TLS[ti].events;
    if (!ev.length) return null;
    return { ti: ti, e: ev[Math.max(0, Math.min(st.ev, ev.length - 1))] };
  }

  function renderPanel(p) {
    var ti = st.sel[p], svg = $('svg-' + p), panel = $('panel-' + p);
    panel.classList.toggle('hidden', ti < 0);
    panel.classList.toggle('target', st.target === p);
    if (ti < 0) { svg.innerHTML = ''; return; }
    var tl = TLS[ti], L = layout(ti);
    var W = Math.max(400, svg.parentNode.clientWidth || 1000), plotW = W - LABEL_W - 8;
    var t0 = st.t0, t1 = st.t0 + st.dt;
    function X(t) { return LABEL_W + (t - t0) / st.dt * plotW; }
    var o = [];
    o.push('<defs><marker id="arr-' + p + '" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" orient="auto-start-reverse">' +
           '<path d="M0,0 L8,4 L0,8 z" fill="#6c3483"/></marker>' +
           '<marker id="arrh-' + p + '" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto-start-reverse">' +
           '<path d="M0,0 L8,4 L0,8 z" fill="#d6336c"/></marker>' +
           '<clipPath id="clip-' + p + '"><rect x="' + LABEL_W + '" y="0" width="' + plotW + '" height="' + L.height + '"/></clipPath></defs>');
    // axis
    var step = niceStep(st.dt / Math.max(2, plotW / 110)), dec = step >= 1000 ? (step >= 10000 ? 0 : 1) : (step >= 100 ? 2 : 3);
    o.push('<g class="axis">');
    for (var t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      var x = X(t);
      o.push('<line x1="' + x.toFixed(1) + '" x2="' + x.toFixed(1) + '" y1="' + (AXIS_H - 4) + '" y2="' + L.height + '"/>' +
             '<text x="' + (x + 2).toFixed(1) + '" y="' + (AXIS_H - 8) + '">' + (t / 1000).toFixed(dec) + ' \u00b5s</text>');
    }
    o.push('</g>');
    // tensor-core rows (one per CTA)
    L.tcRows.forEach(function (r) {
      var iv = r.iv, lo = iv[0][0], hi = iv[iv.length - 1][1];
      o.push('<g class="tc-row" data-tc="' + esc(r.cta) + '"><rect class="tc-bg" x="0" y="' + r.y + '" width="' + W + '" height="' + TC_H + '"/>' +
             '<text class="tc-label" x="6" y="' + (r.y + TC_H - 2.5) + '">tensor core \u00b7 ' + esc(r.cta) + '</text><g clip-path="url(#clip-' + p + ')">');
      var xa0 = Math.max(X(lo), LABEL_W - 2), xb0 = Math.min(X(hi), W);
      if (xb0 > xa0) o.push('<rect class="tc-idle" x="' + xa0.toFixed(1) + '" y="' + (r.y + 2) + '" width="' + (xb0 - xa0).toFixed(1) + '" height="' + (TC_H - 4) + '"/>');
      iv.forEach(function (x) {
        if (x[1] < t0 || x[0] > t1) return;
        var a = X(x[0]), b = X(x[1]);
        o.push('<rect class="tc-busy" x="' + a.toFixed(1) + '" y="' + (r.y + 2) + '" width="' + Math.max(0.6, b - a).toFixed(1) + '" height="' + (TC_H - 4) + '"/>');
      });
      o.push('</g></g>');
    });
    // lanes
    for (var l = 0; l < tl.lanes.length; l++) {
      var ln = tl.lanes[l], parts = ln.split('/'), y0 = L.laneY[l], h = L.laneH[l];
      o.push('<g class="lane" data-lane="' + esc(ln) + '">');
      o.push('<rect class="lane-bg' + (l % 2 ? ' alt' : '') + '" x="0" y="' + y0 + '" width="' + W + '" height="' + h + '"/>');
      o.push('<text class="lane-label" x="6" y="' + (y0 + h / 2 + 1) + '">' + esc(parts.length > 1 ? parts[1] : ln) + '</text>');
      if (parts.length > 1) o.push('<text class="lane-sub" x="6" y="' + (y0 + h / 2 + 12) + '">' + esc(parts[0] + roleNote(parts[1])) + '</text>');
      o.push('<g clip-path="url(#clip-' + p + ')">');
      for (var i = 0; i < tl.spans.length; i++) {
        var s = tl.spans[i];
        if (s[SPAN.lane] !== l || s[SPAN.t1] < t0 || s[SPAN.t0] > t1) continue;
        var k = KINDS[s[SPAN.kind]], xa = X(s[SPAN.t0]), xb = X(s[SPAN.t1]), w = xb - xa, yy, hh, cls = 'sp ' + k;
        if (k === 'issue') { yy = y0 + PAD; hh = ISSUE_H; }
        else if (k === 'wait') {
          yy = y0 + PAD + ISSUE_H + L.nrows[l] * L.rowH[l]; hh = WAIT_H;
          if (w <= 0.01) { cls += ' pass'; xa -= 1.5; w = 3; yy -= 4; hh += 4; }
          if (String(s[SPAN.label]).indexOf('blocked forever') >= 0) cls += ' forever';
        } else {
          var row = Math.min(L.rows[i] || 0, L.nrows[l] - 1);
          yy = y0 + PAD + ISSUE_H + row * L.rowH[l] + 1; hh = L.rowH[l] - 2;
        }
        if (w < 1) { w = 1; }
        o.push('<rect class="' + cls + '" data-i="' + i + '" x="' + xa.toFixed(1) + '" y="' + yy + '" width="' + w.toFixed(1) + '" height="' + hh + '"/>');
        var txt = spanText(tl, s, w);
        if (txt) o.push('<text class="sp-text' + (hh < 12 ? ' small' : '') + '" x="' + (Math.max(xa, LABEL_W) + 3).toFixed(1) + '" y="' + (yy + hh - (hh < 12 ? 2 : 4)) + '">' + esc(txt) + '</text>');
      }
      o.push('</g></g>');
    }
    // hand-offs (arrows), only when few enough are visible
    var cur = curEvent(), hot = -1;
    if (cur && cur.ti === ti) {
      var e = cur.e, sp = tl.spans[e[1]];
      if (e[2] === 1 && KINDS[sp[SPAN.kind]] === 'wait') {
        var key = sp[SPAN.lane] + '|' + e[0].toFixed(1);
        if (L.hoKey.hasOwnProperty(key)) hot = L.hoKey[key];
      }
    }
    var vis = [];
    for (var hI = 0; hI < tl.handoffs.length; hI++) {
      var H = tl.handoffs[hI];
      if (H[6] >= t0 && H[5] <= t1 && H[3] >= 0 && H[4] >= 0) vis.push(hI);
    }
    o.push('<g class="handoffs" clip-path="url(#clip-' + p + ')">');
    if (vis.length <= 260 || hot >= 0) {
      vis.forEach(function (hI2) {
        if (vis.length > 260 && hI2 !== hot) return;
        var H2 = tl.handoffs[hI2], xs = X(H2[5]), xd = X(H2[6]);
        var ys = L.laneY[H2[3]] + L.laneH[H2[3]] / 2, yd = L.laneY[H2[4]] + L.laneH[H2[4]] - PAD - WAIT_H / 2;
        if (ys > yd) ys = L.laneY[H2[3]] + PAD; else ys = L.laneY[H2[3]] + L.laneH[H2[3]] - PAD;
        var bend = 16 + Math.min(40, Math.abs(yd - ys) * 0.12);
        var isHot = hI2 === hot;
        o.push('<path class="ho' + (isHot ? ' hot' : '') + '" data-h="' + hI2 + '" marker-end="url(#' + (isHot ? 'arrh-' : 'arr-') + p + ')" d="M' +
               xs.toFixed(1) + ',' + ys.toFixed(1) + ' C' + (xs + bend).toFixed(1) + ',' + ys.toFixed(1) + ' ' +
               (xd + bend).toFixed(1) + ',' + yd.toFixed(1) + ' ' + xd.toFixed(1) + ',' + yd.toFixed(1) + '"/>');
      });
    }
    o.push('</g>');
    $('note-' + p).textContent = vis.length > 260 ? 'zoom in to see the ' + vis.length + ' barrier hand-offs in this window' :
      (vis.length ? vis.length + ' barrier hand-offs in this window' : '');
    // hazard marker
    var hz = tl.meta && tl.meta.hazard_t;
    if (hz !== null && hz !== undefined && hz >= t0 && hz <= t1) {
      var xh = X(hz);
      o.push('<line class="hazard" x1="' + xh + '" x2="' + xh + '" y1="' + AXIS_H + '" y2="' + L.height + '"/>' +
             '<text class="hazard-text" x="' + (xh + 4) + '" y="' + (AXIS_H + 10) + '">early release</text>');
    }
    // cursor + current span
    if (cur) {
      var tc = cur.e[0];
      if (tc >= t0 && tc <= t1) {
        var xc = X(tc);
        o.push('<line class="cursor" x1="' + xc.toFixed(1) + '" x2="' + xc.toFixed(1) + '" y1="' + (AXIS_H - 4) + '" y2="' + L.height + '"/>');
      }
      if (cur.ti === ti) {
        var cs = tl.spans[cur.e[1]], cl = cs[SPAN.lane], ck = KINDS[cs[SPAN.kind]];
        var cy, ch, cxa = X(cs[SPAN.t0]), cxb = X(cs[SPAN.t1]);
        if (ck === 'wait') { cy = L.laneY[cl] + PAD + ISSUE_H + L.nrows[cl] * L.rowH[cl] - 3; ch = WAIT_H + 6; }
        else if (ck === 'issue') { cy = L.laneY[cl] + 1; ch = ISSUE_H + 4; }
        else { cy = L.laneY[cl] + PAD + ISSUE_H + Math.min(L.rows[cur.e[1]] || 0, L.nrows[cl] - 1) * L.rowH[cl] - 1; ch = L.rowH[cl] + 2; }
        if (cxb - cxa < 6) { var m = (cxa + cxb) / 2; cxa = m - 3; cxb = m + 3; }
        o.push('<rect class="current" id="current-' + p + '" data-span="' + cur.e[1] + '" x="' + cxa.toFixed(1) + '" y="' + cy +
               '" width="' + (cxb - cxa).toFixed(1) + '" height="' + ch + '" clip-path="url(#clip-' + p + ')"/>');
      }
    }
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + L.height);
    svg.setAttribute('height', L.height);
    svg.innerHTML = o.join('');
    // header
    $('badge-' + p).textContent = tl.source === 'sim' ? 'simulated' : tl.source;
    $('badge-' + p).className = 'badge ' + tl.source;
    $('title-' + p).textContent = (p === 'a' ? 'A \u00b7 ' : 'B \u00b7 ') + tl.title;
    var v = $('verdict-' + p), m2 = tl.meta || {};
    if (m2.verdict && m2.verdict !== 'ok') {
      v.className = 'verdict bad';
      v.innerHTML = '<b>' + esc(m2.verdict.replace('_', ' ')) + '</b> \u00b7 what-if <i>' + esc(m2.what_if || '') + '</i>: ' +
        esc(m2.what_if_text || '') + '<br>' + esc((m2.explanation || '').replace(/^(deadlock|early release|early exit): /, '')) +
        (m2.why ? '<br><i>why:</i> ' + esc(m2.why) : '');
    } else if (m2.explanation) {
      v.className = 'verdict info';
      v.innerHTML = (m2.what_if ? '<b>what-if ' + esc(m2.what_if) + '</b> \u2014 ' : '') + esc(m2.explanation);
    } else { v.className = 'verdict'; v.innerHTML = ''; }
  }

  // ------------------------------------------------------------- ring and barrier state
  function renderState(p) {
    var ti = st.sel[p], rings = $('rings-' + p), bars = $('bars-' + p);
    if (ti < 0) { rings.innerHTML = ''; bars.innerHTML = ''; return; }
    var tl = TLS[ti], cur = curEvent(), t = cur ? cur.e[0] : 0;
    var ctas = {}, nst = [{}, {}];
    tl.stages.forEach(function (r) { ctas[r[1]] = 1; nst[r[0]][r[2]] = 1; });
    var depth = (tl.meta && tl.meta.depth) || Object.keys(nst[0]).length;
    var html = [];
    Object.keys(ctas).sort().forEach(function (c) {
      [0, 1].forEach(function (ring) {
        var n = ring === 0 ? depth : Object.keys(nst[1]).length;
        if (!n) return;
        var slot = [];
        for (var s = 0; s < n; s++) slot.push(null);
        tl.stages.forEach(function (r) {
          if (r[0] !== ring || String(r[1]) !== c || r[4] > t || r[5] <= t) return;
          var pri = { loading: 1, writing: 1, full: 2, reading: 3 }[STATES[r[3]]];
          if (r[2] < n && (!slot[r[2]] || pri > slot[r[2]].pri)) slot[r[2]] = { pri: pri, state: STATES[r[3]], k: r[6], tile: r[7] };
        });
        var name = ring === 0 ? 'SMEM operand ring (tma2mma / mma2tma)' : 'accumulator staging (mma2ld / ld2mma)';
        if (tl.meta && tl.meta.style === 'lockstep') name = ring === 0 ? 'SMEM operand ring (full barriers)' : 'staging buffer';
        html.push('<div class="ring"><div class="rt">cta' + c + ' \u00b7 ' + name + '</div><div class="slots">');
        for (var s2 = 0; s2 < n; s2++) {
          var x = slot[s2];
          var lab = x ? x.state + '<br>' + (ring === 0 ? 'k=' + x.k : (x.k ? 'chunk ' + x.k : 'tile ' + x.tile)) : 'empty<br>&nbsp;';
          html.push('<div class="slot ' + (x ? x.state : '') + '" title="stage ' + s2 + '"><b>' + s2 + '</b> ' + lab + '</div>');
        }
        html.push('</div></div>');
      });
    });
    rings.innerHTML = html.join('');
    // barrier table (simulator only)
    if (!tl.blog || !tl.blog.length) { bars.innerHTML = ''; return; }
    var last = {}, order = [], counts = {};
    ((tl.meta && tl.meta.barriers) || []).forEach(function (b) { counts[b.name] = b.count; });
    for (var i = 0; i < tl.blog.length; i++) {
      var r = tl.blog[i];
      if (r[0] > t + 1e-6) break;
      var key = r[1] + '|' + r[2] + '|' + r[3];
      if (!last.hasOwnProperty(key)) order.push(key);
      last[key] = r;
    }
    var multi = Object.keys(ctas).length > 1;
    var rows = ['<table><tr>' + (multi ? '<th>cta</th>' : '') + '<th class="n">mbarrier</th><th>phase</th><th>parity</th><th>pending</th><th>tx bytes</th></tr>'];
    order.forEach(function (key) {
      var r2 = last[key], changed = Math.abs(r2[0] - t) < 0.05 && t > 0;
      rows.push('<tr' + (changed ? ' class="changed"' : '') + '>' + (multi ? '<td>' + r2[1] + '</td>' : '') +
                '<td class="n">' + esc(r2[2]) + '[' + r2[3] + ']</td><td>' + r2[4] + '</td><td>' + (r2[4] & 1) + '</td><td>' +
                r2[5] + (counts.hasOwnProperty(r2[2]) ? '/' + counts[r2[2]] : '') + '</td><td>' + r2[6] + '</td></tr>');
    });
    rows.push('</table>');
    bars.innerHTML = '<div class="rt" style="color:#667085;font-size:11.5px;margin-bottom:2px">mbarrier state at the cursor (simulator)</div>' + rows.join('');
  }

  // ------------------------------------------------------------- KPI cards
  function cards(ti, tag) {
    var tl = TLS[ti], K = tl.kpis, o = [];
    var tagColor = tl.source === 'sim' ? '#3b5bdb' : '#d9480f';
    o.push('<div class="kpi-col" data-timeline="' + ti + '"><h3><span class="tag" style="background:' + tagColor + '">' + tag + '</span>' + esc(short(tl)) + '</h3><div class="cards">');
    o.push('<div class="card big" data-kpi="tensor_core_busy"><div class="k">tensor-core busy</div><div class="v">' + pct(K.tensor_core_busy) +
           '</div><div class="meter"><i style="width:' + (100 * K.tensor_core_busy).toFixed(1) + '%"></i></div></div>');
    o.push('<div class="card" data-kpi="tensor_core_busy_steady"><div class="k">steady busy</div><div class="v">' + pct(K.tensor_core_busy_steady) +
           '</div><div class="meter"><i style="width:' + (100 * K.tensor_core_busy_steady).toFixed(1) + '%"></i></div></div>');
    o.push('<div class="card" data-kpi="fill_ns"><div class="k">fill</div><div class="v">' + fmtNs(K.fill_ns) + '</div></div>');
    o.push('<div class="card" data-kpi="drain_ns"><div class="k">drain</div><div class="v">' + fmtNs(K.drain_ns) + '</div></div>');
    o.push('<div class="card" data-kpi="makespan_ns"><div class="k">makespan</div><div class="v">' + fmtNs(K.makespan_ns) + '</div></div>');
    if (K.softmax_busy !== undefined)
      o.push('<div class="card" data-kpi="softmax_busy"><div class="k">softmax busy</div><div class="v">' + pct(K.softmax_busy) +
             '</div><div class="meter"><i style="width:' + (100 * K.softmax_busy).toFixed(1) + '%"></i></div></div>');
    var occ = K.ring_occupancy && K.ring_occupancy.smem;
    if (occ) o.push('<div class="card" data-kpi="ring_occupancy"><div class="k">full slots (avg)</div><div class="v">' + occ.mean.toFixed(2) +
                    ' <small>/ ' + ((tl.meta && (tl.meta.smem_slots || tl.meta.depth)) || occ.stages) + '</small></div></div>');
    var top = (K.top_stalls || []).slice(0, 3);
    o.push('<div class="card stalls" data-kpi="top_stalls"><div class="k">top stalls <span title="of which the tensor core sat idle">(TC idle)</span></div><table>');
    if (!top.length) o.push('<tr><td>none</td></tr>');
    top.forEach(function (r) {
      o.push('<tr><td>' + esc(r[0]) + '</td><td>' + esc(r[1]) + '</td><td class="n">' + fmtNs(r[2]) + '</td><td class="n x">' +
             (r.length > 3 ? '(' + fmtNs(r[3]) + ')' : '') + '</td></tr>');
    });
    o.push('</table></div></div></div>');
    return o.join('');
  }
  function renderCards() {
    var o = [];
    if (st.sel.a >= 0) o.push(cards(st.sel.a, 'A'));
    if (st.sel.b >= 0) o.push(cards(st.sel.b, 'B'));
    $('kpi-cards').innerHTML = o.join('');
  }

  // ------------------------------------------------------------- compare + summary
  function renderCompare() {
    var pairs = [];
    TLS.forEach(function (a, i) {
      if (a.source !== 'sim' || (a.meta && a.meta.what_if)) return;
      TLS.forEach(function (b, j) { if (b.source === 'measured' && b.step === a.step) pairs.push([i, j]); });
    });
    if (!pairs.length) { $('compare').innerHTML = ''; return; }
    var rowsK = [['tensor-core busy', 'tensor_core_busy', pct], ['steady busy', 'tensor_core_busy_steady', pct],
                 ['fill', 'fill_ns', fmtNs], ['drain', 'drain_ns', fmtNs], ['makespan', 'makespan_ns', fmtNs]];
    var o = ['<h2>Simulated vs measured</h2>'];
    pairs.forEach(function (pr) {
      var A = TLS[pr[0]], B = TLS[pr[1]];
      o.push('<table class="kt" data-pair="' + pr[0] + ',' + pr[1] + '"><tr><th>step ' + A.step + '</th><th>simulated</th><th>measured</th><th>measured / simulated</th></tr>');
      rowsK.forEach(function (r) {
        var x = A.kpis[r[1]], y = B.kpis[r[1]];
        o.push('<tr><td>' + r[0] + '</td><td>' + r[2](x) + '</td><td>' + r[2](y) + '</td><td>' + (x ? (y / x).toFixed(2) : '\u2013') + '</td></tr>');
      });
      o.push('<tr><td colspan="4"><button class="showpair" data-a="' + pr[0] + '" data-b="' + pr[1] + '">show side by side</button></td></tr></table>');
    });
    $('compare').innerHTML = o.join('');
    Array.prototype.forEach.call(document.querySelectorAll('.showpair'), function (b) {
      b.addEventListener('click', function () { setSel('a', +b.getAttribute('data-a')); setSel('b', +b.getAttribute('data-b')); });
    });
  }
  function renderSummary() {
    var o = ['<thead><tr><th class="t">timeline</th><th>source</th><th>depth</th><th>busy</th><th>steady</th><th>fill</th><th>drain</th><th>makespan</th><th>verdict</th></tr></thead><tbody>'];
    TLS.forEach(function (tl, i) {
      var K = tl.kpis, v = (tl.meta && tl.meta.verdict) || '';
      var cls = (st.sel.a === i ? 'sel-a' : '') + (st.sel.b === i ? ' sel-b' : '');
      o.push('<tr data-i="' + i + '" class="' + cls + '"><td class="t">' + esc(tl.title) + '</td><td>' + esc(tl.source) + '</td><td>' +
             ((tl.meta && tl.meta.depth) || '') + '</td><td>' + pct(K.tensor_core_busy) + '</td><td>' + pct(K.tensor_core_busy_steady) +
             '</td><td>' + fmtNs(K.fill_ns) + '</td><td>' + fmtNs(K.drain_ns) + '</td><td>' + fmtNs(K.makespan_ns) + '</td><td class="' +
             (v && v !== 'ok' ? 'v-bad' : 'v-ok') + '">' + esc(v.replace('_', ' ')) + '</td></tr>');
    });
    o.push('</tbody>');
    $('summary-table').innerHTML = o.join('');
  }

  // ------------------------------------------------------------- stepping text
  function describe() {
    var cur = curEvent(), d = $('event-desc'), idx = $('event-index'), sl = $('event-slider');
    if (!cur) { d.innerHTML = 'no events'; idx.textContent = '0 / 0'; sl.max = 0; return; }
    var tl = TLS[cur.ti], e = cur.e, s = tl.spans[e[1]], k = KINDS[s[SPAN.kind]], n = tl.events.length;
    idx.textContent = (st.ev + 1) + ' / ' + n;
    sl.max = n - 1; sl.value = st.ev;
    var lab = s[SPAN.label] || k, forever = String(lab).indexOf('blocked forever') >= 0;
    var what = e[2] === 2 ? 'passes at once' : (k === 'wait' ? (e[2] === 0 ? 'blocks' : (forever ? 'never released (deadlock)' : 'released')) : (e[2] === 0 ? 'begins' : 'ends'));
    lab = String(lab).replace(' - blocked forever', '');
    var txt = '<b>t = ' + fmtNs(e[0]) + '</b> \u00b7 <span class="mono">' + esc(tl.lanes[s[SPAN.lane]]) + '</span> \u00b7 ' + esc(lab) + ': <b>' + what + '</b>';
    if (k === 'wait') {
      var bn = barName(tl, s), par = s[SPAN.phase];
      var bstate = barrierAt(tl, s[SPAN.cta], bn, s[SPAN.stage], e[0]);
      if (e[2] === 2 && bstate) txt += ' \u2014 ' + bn + '[' + s[SPAN.stage] + '] is in phase ' + bstate[4] + ' (parity ' + (bstate[4] & 1) + ' \u2260 ' + par + '), so the wait for parity ' + par + ' succeeds immediately';
      else if (e[2] === 0 && bstate) txt += ' \u2014 ' + bn + '[' + s[SPAN.stage] + '] is in phase ' + bstate[4] + ' (parity ' + (bstate[4] & 1) + ' = ' + par + '): the phase with parity ' + par + ' has not completed yet';
      else if (e[2] === 1) {
        var L = layout(cur.ti), key = s[SPAN.lane] + '|' + e[0].toFixed(1);
        if (L.hoKey.hasOwnProperty(key)) {
          var H = tl.handoffs[L.hoKey[key]];
          txt += ' \u2014 ' + bn + '[' + s[SPAN.stage] + '] completed its phase at ' + fmtNs(H[5]) + ' (last arrival by <span class="mono">' + esc(H[3] >= 0 ? tl.lanes[H[3]] : '?') + '</span>)';
        }
      }
    } else if (e[2] === 0 && KIND_TEXT[k]) {
      txt += ' <span style="color:#667085">(' + KIND_TEXT[k] + ', ' + fmtNs(s[SPAN.t1] - s[SPAN.t0]) + ')</span>';
    }
    d.innerHTML = txt;
  }
  function barrierAt(tl, cta, name, stage, t) {
    if (!tl.blog || !name) return null;
    var best = null;
    for (var i = 0; i < tl.blog.length; i++) {
      var r = tl.blog[i];
      if (r[0] > t + 1e-6) break;
      if (r[1] === cta && r[2] === name && r[3] === stage) best = r;
    }
    return best;
  }

  // ------------------------------------------------------------- controls
  function winLabel() {
    $('win-label').textContent = fmtNs(st.t0) + ' \u2026 ' + fmtNs(st.t0 + st.dt);
    var ex = extent(), span = Math.max(1e-9, ex[1] - ex[0] - st.dt);
    $('win-slider').value = Math.round(1000 * Math.max(0, Math.min(1, (st.t0 - ex[0]) / span)));
  }
  function renderAll() {
    renderPanel('a'); renderPanel('b'); renderState('a'); renderState('b'); describe(); winLabel();
  }
  function setWindow(t0, dt) {
    var ex = extent(), full = (ex[1] - ex[0]) * 1.04 + 1;
    st.dt = Math.max(40, Math.min(dt, full));
    st.t0 = Math.max(ex[0] - full * 0.02, Math.min(t0, ex[1] - st.dt * 0.5));
  }
  function follow() {
    var cur = curEvent();
    if (!cur) return;
    var t = cur.e[0];
    if (t < st.t0 || t > st.t0 + st.dt * 0.92) setWindow(t - st.dt * 0.3, st.dt);
  }
  function go(i) {
    var cur = curEvent();
    if (!cur) return;
    var n = TLS[cur.ti].events.length;
    st.ev = Math.max(0, Math.min(n - 1, i));
    follow(); renderAll();
  }
  function setSel(p, ti) {
    st.sel[p] = ti;
    $('select-' + p).value = String(ti);
    if (st.target === p) st.ev = 0;
    if (st.sel[st.target] < 0) { st.target = st.sel.a >= 0 ? 'a' : 'b'; $('step-target').value = st.target; st.ev = 0; }
    renderCards(); renderSummary(); renderAll();
  }
  function fill(sel, withNone) {
    var o = withNone ? ['<option value="-1">(none)</option>'] : [];
    TLS.forEach(function (tl, i) { o.push('<option value="' + i + '">' + esc(short(tl)) + '</option>'); });
    sel.innerHTML = o.join('');
  }
  function legend() {
    var o = [];
    var kinds = ['load', 'mma', 'epilogue', 'store', 'wait', 'issue'];
    if (TLS.some(function (t) { return t.spans.some(function (x) { return KINDS[x[SPAN.kind]] === 'softmax'; }); })) kinds.push('softmax');
    kinds.forEach(function (k) {
      o.push('<span><i class="sw" style="background:' + COLORS[k] + '"></i>' + KIND_TEXT[k] + '</span>');
    });
    o.push('<span><i class="sw" style="background:#2b8a3e;width:4px"></i>wait passes at once</span>');
    o.push('<span><i class="sw" style="background:none;border-top:2px solid #b07ad0;height:0"></i>barrier hand-off</span>');
    $('legend').innerHTML = o.join('');
  }
  function tooltip(ev) {
    var tip = $('tooltip'), tgt = ev.target, svg = ev.currentTarget, p = svg.getAttribute('data-panel');
    var i = tgt.getAttribute && tgt.getAttribute('data-i'), hI = tgt.getAttribute && tgt.getAttribute('data-h');
    var ti = st.sel[p];
    if (ti < 0 || (i === null && hI === null)) { tip.style.display = 'none'; return; }
    var tl = TLS[ti], html;
    if (i !== null) {
      var s = tl.spans[+i], k = KINDS[s[SPAN.kind]];
      html = '<b>' + esc(s[SPAN.label] || k) + '</b><br>' + esc(tl.lanes[s[SPAN.lane]]) + ' \u00b7 ' + k + '<br>' +
             fmtNs(s[SPAN.t0]) + ' \u2192 ' + fmtNs(s[SPAN.t1]) + ' (' + fmtNs(s[SPAN.t1] - s[SPAN.t0]) + ')';
      if (s[SPAN.tile] !== null && s[SPAN.tile] !== undefined) html += '<br>tile ' + s[SPAN.tile] + (s[SPAN.k] !== null ? ', k ' + s[SPAN.k] : '') + (s[SPAN.stage] !== null ? ', stage ' + s[SPAN.stage] : '');
    } else {
      var H = tl.handoffs[+hI];
      html = '<b>' + esc(tl.bars[H[0]]) + '[' + H[1] + ']</b> phase complete at ' + fmtNs(H[5]) + '<br>' +
             esc(H[3] >= 0 ? tl.lanes[H[3]] : '?') + ' \u2192 ' + esc(tl.lanes[H[4]]) + ' (waited for parity ' + H[2] + ')';
    }
    tip.innerHTML = html; tip.style.display = 'block';
    tip.style.left = Math.min(window.innerWidth - 470, ev.clientX + 14) + 'px';
    tip.style.top = (ev.clientY + 14) + 'px';
  }

  function init() {
    legend();
    fill($('select-a'), false); fill($('select-b'), true);
    $('select-a').value = String(st.sel.a); $('select-b').value = String(st.sel.b);
    if (st.sel.a < 0 && TLS.length) st.sel.a = 0;
    $('select-a').addEventListener('change', function () { setSel('a', +this.value); });
    $('select-b').addEventListener('change', function () { setSel('b', +this.value); });
    $('swap').addEventListener('click', function () {
      var a = st.sel.a, b = st.sel.b;
      if (b < 0) return;
      st.sel.a = b; st.sel.b = a; $('select-a').value = String(b); $('select-b').value = String(a);
      st.ev = 0; renderCards(); renderSummary(); renderAll();
    });
    $('step-target').addEventListener('change', function () {
      var p = this.value;
      if (st.sel[p] < 0) { this.value = st.target; return; }
      st.target = p; st.ev = 0; follow(); renderAll();
    });
    $('next-event').addEventListener('click', function () { go(st.ev + 1); });
    $('prev-event').addEventListener('click', function () { go(st.ev - 1); });
    $('first-event').addEventListener('click', function () { setWindow(0, Math.min(STARTUP_NS, st.dt)); go(0); });
    $('event-slider').addEventListener('input', function () { go(+this.value); });
    $('play').addEventListener('click', function () {
      var b = this;
      if (st.timer) { clearInterval(st.timer); st.timer = null; b.classList.remove('on'); b.innerHTML = '\u25b6 play'; return; }
      b.classList.add('on'); b.innerHTML = '\u275a\u275a pause';
      st.timer = setInterval(function () {
        var cur = curEvent();
        if (!cur || st.ev >= TLS[cur.ti].events.length - 1) { b.click(); return; }
        go(st.ev + 1);
      }, 220);
    });
    $('zoom-in').addEventListener('click', function () { setWindow(st.t0 + st.dt * 0.25, st.dt * 0.5); renderAll(); });
    $('zoom-out').addEventListener('click', function () { setWindow(st.t0 - st.dt * 0.5, st.dt * 2); renderAll(); });
    $('fit').addEventListener('click', function () { var ex = extent(); setWindow(ex[0], (ex[1] - ex[0]) * 1.02); renderAll(); });
    $('startup').addEventListener('click', function () { var ex = extent(); setWindow(ex[0], STARTUP_NS); renderAll(); });
    $('win-slider').addEventListener('input', function () {
      var ex = extent(); setWindow(ex[0] + (+this.value / 1000) * Math.max(0, ex[1] - ex[0] - st.dt), st.dt); renderAll();
    });
    $('summary-table').addEventListener('click', function (ev) {
      var tr = ev.target.closest ? ev.target.closest('tr[data-i]') : null;
      if (tr) setSel(ev.shiftKey ? 'b' : 'a', +tr.getAttribute('data-i'));
    });
    ['a', 'b'].forEach(function (p) {
      var svg = $('svg-' + p), wrap = svg.parentNode, drag = null;
      svg.addEventListener('mousemove', tooltip);
      svg.addEventListener('mouseleave', function () { $('tooltip').style.display = 'none'; });
      svg.addEventListener('click', function () {
        if (st.target !== p && st.sel[p] >= 0) { st.target = p; $('step-target').value = p; st.ev = 0; renderAll(); }
      });
      wrap.addEventListener('wheel', function (ev) {
        ev.preventDefault();
        var r = svg.getBoundingClientRect(), scale = (svg.viewBox.baseVal && svg.viewBox.baseVal.width) ? svg.viewBox.baseVal.width / r.width : 1;
        var plotW = (svg.viewBox.baseVal.width || r.width) - LABEL_W - 8;
        var fx = Math.max(0, Math.min(1, ((ev.clientX - r.left) * scale - LABEL_W) / plotW));
        var tm = st.t0 + fx * st.dt, f = ev.deltaY > 0 ? 1.25 : 0.8;
        var ndt = st.dt * f;
        setWindow(tm - fx * ndt, ndt); renderAll();
      }, { passive: false });
      wrap.addEventListener('mousedown', function (ev) {
        drag = { x: ev.clientX, t0: st.t0, w: svg.getBoundingClientRect().width }; wrap.classList.add('dragging');
      });
      window.addEventListener('mousemove', function (ev) {
        if (!drag) return;
        var plotW = drag.w - LABEL_W - 8;
        setWindow(drag.t0 - (ev.clientX - drag.x) / plotW * st.dt, st.dt); renderAll();
      });
      window.addEventListener('mouseup', function () { drag = null; wrap.classList.remove('dragging'); });
    });
    document.addEventListener('keydown', function (ev) {
      var tag = (ev.target && ev.target.tagName) || '';
      if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA') return;
      if (ev.key === 'ArrowRight') { go(st.ev + 1); ev.preventDefault(); }
      else if (ev.key === 'ArrowLeft') { go(st.ev - 1); ev.preventDefault(); }
      else if (ev.key === 'Home') { go(0); }
      else if (ev.key === '+' || ev.key === '=') { $('zoom-in').click(); }
      else if (ev.key === '-') { $('zoom-out').click(); }
      else if (ev.key === 'f') { $('fit').click(); }
      else if (ev.key === ' ') { $('play').click(); ev.preventDefault(); }
    });
    var resizeT = null;
    window.addEventListener('resize', function () { clearTimeout(resizeT); resizeT = setTimeout(renderAll, 80); });
    var ex = extent();
    setWindow(ex[0], STARTUP_NS);
    renderCards(); renderCompare(); renderSummary(); renderAll();
    document.body.setAttribute('data-ready', '1');
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init); else init();
})();
