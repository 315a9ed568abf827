// bt_exec operator console: plain JavaScript, no libraries, no build step.
//
// Data flow: the plan lists and a plan's tree are fetched from the JSON API;
// afterwards every change arrives on the event stream (EventSource /api/events)
// and is applied in place: a node_state event touches only that op's SVG group
// (a Map op_id -> elements), and DOM writes are batched in requestAnimationFrame,
// so a tree of thousands of ops stays responsive. Nothing is polled.
//
// The page's Content-Security-Policy allows scripts and styles from this server
// only: no inline scripts or style attributes in the markup; styles are classes
// in app.css, geometry is set through the DOM from here.
'use strict';

(() => {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const SYMBOL = {
    pending: '○', running: '▶', paused: '‖', succeeded: '✓', failed: '✗', canceled: '⊘', timeout: '◷',
  };
  const OUTCOME_SYMBOL = { succeeded: '✓', failed: '✗', cancelled: '⊘', running: '▶', cancelling: '⊘' };
  const FINAL_STATES = new Set(['succeeded', 'failed', 'canceled', 'timeout']);
  const TERMINALS = new Set(['completed', 'stop', 'replan_required', 'operator_required']);
  const LOG_MAX = 500;
  const FINISHED_LIMIT = 30;
  const TOKEN_KEY = 'bt_exec.token';

  // Tree geometry (SVG user units = CSS px at zoom 100%).
  const NODE_W = 222;
  const NODE_H = 58;
  const COL_W = 252;     // horizontal distance between depths
  const ROW_H = 70;      // vertical distance between leaf slots
  const PAD = 12;
  const MAX_PARENT_DROP = 3;  // rows
  const DESC_CHARS = 32;
  const HEAD_CHARS = 16;    // leaves room for the state word on the right
  const SUB_CHARS = 33;
  const MAX_PULSING = 20;   // more running ops than this: no pulse (each pulse repaints every frame)
  const ZOOMS = [0.3, 0.4, 0.5, 0.65, 0.8, 1, 1.2, 1.5, 2];

  const $ = (selector) => document.querySelector(selector);

  // ---------------------------------------------------------------- DOM helpers

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function s(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function setAttrs(node, attrs) {
    if (!attrs) return;
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (name === 'text') node.textContent = value;
      else node.setAttribute(name, value === true ? '' : String(value));
    }
  }

  function append(node, children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    }
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function truncate(text, max) {
    const value = text === null || text === undefined ? '' : String(text);
    return value.length > max ? value.slice(0, max - 1) + '…' : value;
  }

  function pretty(value) {
    if (typeof value === 'string') return value;
    try {
      return JSON.stringify(value, null, 2);
    } catch (err) {
      return String(value);
    }
  }

  function clock(seconds) {
    if (!seconds) return '';
    const date = new Date(seconds * 1000);
    return date.toLocaleTimeString([], { hour12: false }) + '.' + String(date.getMilliseconds()).padStart(3, '0');
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return '';
    return seconds < 10 ? seconds.toFixed(2) + ' s' : seconds.toFixed(1) + ' s';
  }

  function byPlanId(a, b) {
    return Number(b.plan_id) - Number(a.plan_id) || String(b.plan_id).localeCompare(String(a.plan_id));
  }

  // ---------------------------------------------------------------- state

  const st = {
    info: null,
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    events: null,           // the EventSource of /api/events
    running: [],
    finished: [],
    selectedPlan: null,
    followedUpTo: 0,        // newest running plan id already followed
    tree: null,             // the selected plan's tree view (metadata; ops live in `ops`)
    renderedPlan: null,
    ops: new Map(),         // op_id -> {op, g, parts, stops:Set}
    transitionEls: new Map(),
    selectedOp: null,
    buffer: null,           // node events that arrived while a tree fetch was in flight
    bufferPlan: null,
    treeRequest: 0,
    dirty: new Set(),
    detailsDirty: false,
    frameRequested: false,
    hydrateRequested: false,
    logQueue: [],
    logHold: null,          // events held while /api/events/recent is being read
    lastLogSeq: 0,
    zoomIndex: ZOOMS.indexOf(1),
    size: { width: 0, height: 0 },
    listsBusy: false,
    listsAgain: false,
    loadFailed: false,
    missed: 0,              // events the server dropped for this page
    droppedNote: null,
  };

  // ---------------------------------------------------------------- messages

  function showMessage(kind, text) {
    const box = $('#messages');
    const close = h('button', { type: 'button', class: 'msg-close', 'aria-label': 'Dismiss', text: '×' });
    const label = { error: 'Error', warn: 'Warning', info: 'Info' }[kind] || 'Info';
    const item = h('div', { class: `msg msg-${kind}` },
      h('span', { class: 'msg-kind', text: label }), h('span', { class: 'msg-text', text }), close);
    close.addEventListener('click', () => item.remove());
    box.insertBefore(item, box.firstChild);
    while (box.childElementCount > 4) box.lastElementChild.remove();
    if (kind === 'info') setTimeout(() => item.remove(), 8000);
    return item;
  }

  function report(err) {
    const code = err && err.code ? `${err.code}: ` : '';
    showMessage('error', code + (err && err.message ? err.message : String(err)));
    if (err && err.status === 401) {
      $('#token-field').hidden = false;
      $('#token').focus();
    }
  }

  // ---------------------------------------------------------------- API

  class ApiFailure extends Error {
    constructor(code, message, status) {
      super(message);
      this.code = code;
      this.status = status || 0;
    }
  }

  async function api(method, path, body) {
    const options = { method, headers: { Accept: 'application/json' } };
    // Every request: an app bound beyond loopback wants the token for reads too.
    if (st.token) options.headers.Authorization = 'Bearer ' + st.token;
    if (method !== 'GET') {
      options.headers['Content-Type'] = 'application/json';
      options.body = JSON.stringify(body || {});
    }
    let response;
    try {
      response = await fetch(path, options);
    } catch (err) {
      throw new ApiFailure('network', `${method} ${path}: the server cannot be reached (${err.message})`);
    }
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = null;
    }
    if (!response.ok) {
      const error = (data && data.error) || {};
      throw new ApiFailure(error.code || `http_${response.status}`,
        error.message || `${method} ${path} failed with HTTP ${response.status}`, response.status);
    }
    if (data === null) throw new ApiFailure('bad_response', `${method} ${path}: the answer is not JSON`);
    return data;
  }

  const planPath = (planId, rest) => `/api/plans/${encodeURIComponent(planId)}/${rest}`;

  // ---------------------------------------------------------------- frame batching

  function schedule() {
    if (st.frameRequested) return;
    st.frameRequested = true;
    requestAnimationFrame(flush);
  }

  function flush() {
    st.frameRequested = false;
    if (st.dirty.size) {
      for (const opId of st.dirty) {
        const entry = st.ops.get(opId);
        if (entry) paintOp(entry);
      }
      st.dirty.clear();
      updateCalm();
    }
    if (st.detailsDirty) {
      st.detailsDirty = false;
      renderDetails();
    }
    flushLog();
  }

  function updateCalm() {
    let running = 0;
    for (const entry of st.ops.values()) if (entry.op.state === 'running') running += 1;
    $('#tree').classList.toggle('calm', running > MAX_PULSING);
  }

  function markDirty(opId) {
    st.dirty.add(opId);
    if (opId === st.selectedOp) st.detailsDirty = true;
    schedule();
  }

  // ---------------------------------------------------------------- plan lists

  async function refreshLists() {
    if (st.listsBusy) {
      st.listsAgain = true;
      return;
    }
    st.listsBusy = true;
    try {
      do {
        st.listsAgain = false;
        const [running, finished] = await Promise.all([
          api('GET', '/api/plans'), api('GET', `/api/finished?limit=${FINISHED_LIMIT}`)]);
        const done = new Set(finished.plans.map((plan) => plan.plan_id));
        st.running = running.plans.filter((plan) => !done.has(plan.plan_id)).sort(byPlanId);
        st.finished = finished.plans;
        renderLists();
        autoSelect();
      } while (st.listsAgain);
    } catch (err) {
      report(err);
    } finally {
      st.listsBusy = false;
    }
  }

  function autoSelect() {
    const newest = st.running[0];
    if (newest && $('#follow').checked && Number(newest.plan_id) > st.followedUpTo) {
      st.followedUpTo = Number(newest.plan_id);
      if (newest.plan_id !== st.selectedPlan) selectPlan(newest.plan_id);
      return;
    }
    if (newest) st.followedUpTo = Math.max(st.followedUpTo, Number(newest.plan_id));
    if (st.selectedPlan === null) {
      const first = newest || st.finished[0];
      if (first) selectPlan(first.plan_id);
    }
  }

  function planButton(plan, finished) {
    const state = finished ? plan.outcome : (plan.cancelled ? 'cancelling' : 'running');
    const meta = [`${plan.op_count} ops`];
    if (!finished && plan.stop_points) meta.push(`${plan.stop_points} stop point${plan.stop_points > 1 ? 's' : ''}`);
    if (finished && plan.duration_s !== undefined) meta.push(duration(plan.duration_s));
    if (finished && plan.dialect) meta.push(plan.dialect);
    const selected = plan.plan_id === st.selectedPlan;
    const button = h('button', {
      type: 'button', class: `plan-item outcome-${state}${selected ? ' selected' : ''}`,
      'data-plan-id': plan.plan_id, 'aria-current': selected ? 'true' : null,
      title: plan.description || '',
    },
    h('span', { class: 'plan-line' },
      h('span', { class: 'plan-id', text: `#${plan.plan_id}` }),
      h('span', { class: `badge outcome-${state}`, text: `${OUTCOME_SYMBOL[state] || '•'} ${state}` })),
    h('span', { class: 'plan-desc-line', text: truncate(plan.description || '(no description)', 60) }),
    h('span', { class: 'plan-meta', text: meta.join(' · ') }));
    return h('li', null, button);
  }

  function renderLists() {
    const running = $('#running-plans');
    const finished = $('#finished-plans');
    clear(running);
    clear(finished);
    for (const plan of st.running) running.appendChild(planButton(plan, false));
    for (const plan of st.finished) finished.appendChild(planButton(plan, true));
    $('#running-count').textContent = String(st.running.length);
    $('#finished-count').textContent = String(st.finished.length);
    $('#running-empty').hidden = st.running.length > 0;
    $('#finished-empty').hidden = st.finished.length > 0;
  }

  function markSelectedInLists() {
    for (const button of document.querySelectorAll('.plan-item')) {
      const selected = button.dataset.planId === st.selectedPlan;
      button.classList.toggle('selected', selected);
      if (selected) button.setAttribute('aria-current', 'true');
      else button.removeAttribute('aria-current');
    }
  }

  // ---------------------------------------------------------------- selecting and loading a plan

  function selectPlan(planId) {
    if (planId === st.selectedPlan && st.tree) return;
    st.selectedPlan = planId;
    st.selectedOp = null;
    st.tree = null;
    st.loadFailed = false;
    markSelectedInLists();
    renderStatus();
    renderDetails();
    loadTree(planId);
  }

  async function loadTree(planId) {
    const request = ++st.treeRequest;
    // Events that arrive from now on are replayed over the answer. Everything received before
    // is in the answer already; of those received later, it holds some, and replaying an unbroken
    // run of events in order ends in the right state (a break in the run is a 'dropped' event,
    // which asks for the tree again and so starts a new run).
    st.buffer = [];
    st.bufferPlan = planId;
    let tree;
    try {
      tree = await api('GET', planPath(planId, 'tree'));
    } catch (err) {
      if (request === st.treeRequest) {
        st.buffer = null;
        st.loadFailed = true;
        clearTree(`Plan ${planId} cannot be shown: ${err.message}`);
        renderStatus();
        report(err);
      }
      return;
    }
    if (request !== st.treeRequest || planId !== st.selectedPlan) return;
    const buffered = st.buffer || [];
    st.buffer = null;
    st.loadFailed = false;
    renderTree(tree);
    for (const event of buffered) applyNodeEvent(event, true);
  }

  function reloadSelected() {
    if (st.selectedPlan !== null) loadTree(st.selectedPlan);
  }

  // ---------------------------------------------------------------- status line

  function planState() {
    const tree = st.tree;
    if (!tree) return null;
    if (tree.running) return tree.cancelled ? 'cancelling' : 'running';
    return tree.outcome || 'finished';
  }

  function renderStatus() {
    const status = $('#status');
    if (st.selectedPlan === null) {
      status.textContent = 'no plan selected';
      status.className = 'status';
      return;
    }
    const state = planState();
    if (state === null) {
      status.textContent = `plan ${st.selectedPlan}: ${st.loadFailed ? 'cannot be shown' : 'loading…'}`;
      status.className = 'status';
      return;
    }
    let text = `${OUTCOME_SYMBOL[state] || '•'} plan ${st.selectedPlan}: ${state}`;
    if (st.tree.cancel_reason && state !== 'running') text += ` (${st.tree.cancel_reason})`;
    else if (st.tree.error) text += ` (${st.tree.error})`;
    status.textContent = text;
    status.className = `status outcome-${state}`;
  }

  // ---------------------------------------------------------------- tree rendering

  function renderTree(tree) {
    const sameShape = st.renderedPlan === tree.plan_id && st.ops.size === tree.ops.length &&
      tree.ops.every((op) => st.ops.has(op.op_id));
    st.tree = tree;
    if (sameShape) {
      for (const op of tree.ops) {
        const entry = st.ops.get(op.op_id);
        entry.op = op;
        entry.stops = stopsOf(op, tree, entry.stops);
        markDirty(op.op_id);
      }
      if (tree.transitions) markTakenFromPath(tree);
    } else {
      buildTree(tree);
    }
    $('#plan-desc').textContent = tree.description || '';
    renderStatus();
    st.detailsDirty = true;
    schedule();
  }

  function stopsOf(op, tree, known) {
    if (!tree.running) return new Set();
    const stops = new Set(known || []);
    if (op.stop_point) stops.add(op.stop_point);
    return stops;
  }

  function clearTree(note) {
    clear($('#tree'));
    $('#tree').setAttribute('width', 0);
    $('#tree').setAttribute('height', 0);
    st.ops = new Map();
    st.transitionEls = new Map();
    st.renderedPlan = null;
    st.selectedOp = null;
    $('#plan-desc').textContent = '';
    $('#tree-empty').textContent = note;
    $('#tree-empty').hidden = false;
    renderDetails();
  }

  function buildTree(tree) {
    const svg = $('#tree');
    clear(svg);
    st.ops = new Map();
    st.transitionEls = new Map();
    st.dirty.clear();
    st.renderedPlan = tree.plan_id;
    const isGraph = Boolean(tree.transitions);
    const layout = isGraph ? layoutSteps(tree) : layoutTree(tree);
    const edges = s('g', { class: 'edges' });
    const nodes = s('g', { class: 'nodes' });
    if (layout.edgePath) edges.appendChild(s('path', { class: 'edge', d: layout.edgePath }));
    for (const op of tree.ops) {
      const where = layout.positions.get(op.op_id);
      if (!where) continue;
      const entry = makeNode(op, where.x, where.y, tree);
      entry.stops = stopsOf(op, tree, null);
      nodes.appendChild(entry.g);
      st.ops.set(op.op_id, entry);
      if (isGraph) nodes.appendChild(makeTransitions(op.op_id, tree.transitions[op.op_id] || {}, where));
      paintOp(entry);
    }
    updateCalm();
    svg.append(edges, nodes);  // built detached: one insertion, one layout
    if (isGraph) markTakenFromPath(tree);
    st.size = { width: layout.width, height: layout.height };
    svg.setAttribute('viewBox', `0 0 ${layout.width} ${layout.height}`);
    applyZoom();
    $('#tree-empty').hidden = true;
    $('#tree-scroll').scrollTo(0, 0);
    scheduleHydrate();
  }

  // Tidy layout, depth left to right: leaves take consecutive rows, a parent is centred on its children.
  function layoutTree(tree) {
    const byId = new Map(tree.ops.map((op) => [op.op_id, op]));
    const positions = new Map();
    let slot = 0;
    let maxDepth = 0;
    const edges = [];
    const place = (opId, depth) => {
      const op = byId.get(opId);
      if (!op || positions.has(opId)) return null;
      positions.set(opId, null);  // reserved: a malformed graph cannot loop
      maxDepth = Math.max(maxDepth, depth);
      const childYs = [];
      for (const child of op.children || []) {
        const y = place(child, depth + 1);
        if (y !== null) {
          childYs.push(y);
          edges.push([depth, null, depth + 1, y, opId]);
        }
      }
      // Centred on its children, but never more than a few rows below the first: a parent of a hundred
      // ops stays next to the ops it starts with instead of thousands of pixels away.
      const y = childYs.length
        ? Math.min((childYs[0] + childYs[childYs.length - 1]) / 2, childYs[0] + MAX_PARENT_DROP * ROW_H)
        : PAD + ROW_H * slot++;
      positions.set(opId, { x: PAD + depth * COL_W, y });
      return y;
    };
    place(tree.root, 0);
    for (const op of tree.ops) if (!positions.has(op.op_id)) place(op.op_id, 0);
    const gap = (COL_W - NODE_W) / 2;
    const path = [];
    for (const [depth, , childDepth, childY, parentId] of edges) {
      const parentY = positions.get(parentId).y + NODE_H / 2;
      const x1 = PAD + depth * COL_W + NODE_W;
      const x2 = PAD + childDepth * COL_W;
      path.push(`M${x1} ${parentY}H${x1 + gap}V${childY + NODE_H / 2}H${x2}`);
    }
    return {
      positions,
      edgePath: path.join(''),
      width: PAD * 2 + maxDepth * COL_W + NODE_W,
      height: PAD * 2 + Math.max(1, slot) * ROW_H - (ROW_H - NODE_H),
    };
  }

  // Step graphs: one row per step, in plan order, with its transitions listed beside it.
  function layoutSteps(tree) {
    const positions = new Map();
    let y = PAD;
    let widest = 0;
    for (const op of tree.ops) {
      const edges = Object.entries(tree.transitions[op.op_id] || {});
      positions.set(op.op_id, { x: PAD, y, lines: edges.length });
      for (const [outcome, next] of edges) widest = Math.max(widest, outcome.length + next.length + 3);
      y += Math.max(NODE_H, edges.length * 17 + 4) + 14;
    }
    return {
      positions,
      edgePath: '',
      width: PAD * 2 + NODE_W + 28 + Math.max(20, widest) * 7.4,
      height: y - 14 + PAD,
    };
  }

  // A node is its group and box at once; its texts are added when it first comes near the viewport
  // (hydrate), so a 1,000-op tree lays out 1,000 boxes, not 5,000 texts, before it shows.
  function makeNode(op, x, y, tree) {
    const g = s('g', {
      class: 'op', 'data-op-id': op.op_id, transform: `translate(${x},${y})`, tabindex: '0', role: 'button',
    });
    const box = s('rect', { class: 'box', width: NODE_W, height: NODE_H, rx: 6, ry: 6 });
    g.append(box);
    return { op, g, x, y, isRoot: op.op_id === tree.root, parts: null, badge: null, stops: new Set() };
  }

  function hydrate(entry) {
    const op = entry.op;
    const title = s('title');
    entry.g.insertBefore(title, entry.g.firstChild);
    const symbol = s('text', { class: 'sym', x: 10, y: 19 });
    const head = s('text', { class: 'head', x: 27, y: 19, text: truncate(`${op.op_id} · ${op.kind}`, HEAD_CHARS) });
    const stateLabel = s('text', { class: 'state-label', x: NODE_W - 10, y: 19, 'text-anchor': 'end' });
    const desc = s('text', { class: 'desc', x: 10, y: 36, text: truncate(op.description, DESC_CHARS) });
    let sub = (entry.isRoot && st.tree && st.tree.transitions ? 'entry · ' : '') + (op.cap || '');
    if (!sub && op.children && op.children.length) sub = `${op.children.length} child${op.children.length > 1 ? 'ren' : ''}`;
    const subText = s('text', { class: 'sub', x: 10, y: 51, text: truncate(sub, SUB_CHARS) });
    entry.g.insertBefore(symbol, entry.badge ? entry.badge.group : null);
    entry.g.insertBefore(head, entry.badge ? entry.badge.group : null);
    entry.g.insertBefore(stateLabel, entry.badge ? entry.badge.group : null);
    entry.g.insertBefore(desc, entry.badge ? entry.badge.group : null);
    entry.g.insertBefore(subText, entry.badge ? entry.badge.group : null);
    entry.parts = { title, symbol, stateLabel };
    paintParts(entry);
  }

  // Texts for the nodes in view and one viewport around it; called on scroll, zoom and (re)build.
  function hydrateVisible() {
    st.hydrateRequested = false;
    const scroller = $('#tree-scroll');
    const zoom = ZOOMS[st.zoomIndex];
    const left = (scroller.scrollLeft - scroller.clientWidth) / zoom - NODE_W;
    const right = (scroller.scrollLeft + 2 * scroller.clientWidth) / zoom;
    const top = (scroller.scrollTop - scroller.clientHeight) / zoom - NODE_H;
    const bottom = (scroller.scrollTop + 2 * scroller.clientHeight) / zoom;
    for (const entry of st.ops.values()) {
      if (!entry.parts && entry.x >= left && entry.x <= right && entry.y >= top && entry.y <= bottom) hydrate(entry);
    }
  }

  function scheduleHydrate() {
    if (st.hydrateRequested) return;
    st.hydrateRequested = true;
    requestAnimationFrame(hydrateVisible);
  }

  function makeTransitions(stepId, edges, where) {
    const group = s('g', { class: 'transitions', transform: `translate(${where.x + NODE_W + 28},${where.y})` });
    const entries = Object.entries(edges);
    if (entries.length) {
      group.appendChild(s('path', {
        class: 'edge', d: `M-28 ${NODE_H / 2}H-14M-14 10V${Math.max(10, (entries.length - 1) * 17 + 10)}`,
      }));
    }
    entries.forEach(([outcome, next], index) => {
      const terminal = TERMINALS.has(next);
      const text = s('text', {
        class: `transition${terminal ? ` terminal terminal-${next}` : ''}`, x: 0, y: 14 + index * 17,
        'data-from': stepId, 'data-outcome': outcome,
      },
      s('tspan', { class: 'outcome', text: outcome }), s('tspan', { text: ' → ' }),
      s('tspan', { class: 'next', text: next }));
      st.transitionEls.set(`${stepId}\u0000${outcome}`, { el: text, next });
      group.appendChild(text);
    });
    return group;
  }

  function markTakenFromPath(tree) {
    // path: the steps whose transition was taken; while running, the last one led to the running step.
    const path = (tree.path || []).slice();
    const current = tree.running && tree.ops.find((op) => op.state === 'running');
    if (current) path.push(current.op_id);
    for (let i = 0; i + 1 < path.length; i += 1) {
      const edges = (tree.transitions || {})[path[i]] || {};
      for (const [outcome, next] of Object.entries(edges)) {
        if (next === path[i + 1]) markTaken(path[i], outcome);
      }
    }
  }

  function markTaken(step, outcome) {
    const found = st.transitionEls.get(`${step}\u0000${outcome}`);
    if (found) found.el.classList.add('taken');
  }

  function opClass(entry) {
    const op = entry.op;
    let cls = `op kind-${op.kind} state-${op.state}`;
    for (const when of entry.stops) cls += ` stop-${when}`;
    if (op.op_id === st.selectedOp) cls += ' selected';
    return cls;
  }

  function paintParts(entry) {
    const op = entry.op;
    const stops = [...entry.stops].map((when) => `stop point ${when}`).join(', ');
    entry.parts.symbol.textContent = SYMBOL[op.state] || '•';
    entry.parts.stateLabel.textContent = op.state;
    entry.parts.title.textContent = `${op.op_id} · ${op.kind} — ${op.state}${stops ? ' — ' + stops : ''}\n` +
      `${op.description || ''}${op.cap ? `\ncap: ${op.cap}` : ''}`;
  }

  function paintOp(entry) {
    const op = entry.op;
    const stops = [...entry.stops].map((when) => `stop point ${when}`).join(', ');
    entry.g.setAttribute('class', opClass(entry));
    // Every node, drawn in full or not yet, is named for screen readers.
    entry.g.setAttribute('aria-label', `op ${op.op_id}, ${op.kind}, ${op.state}${stops ? ', ' + stops : ''}: ` +
      `${op.description || ''}`);
    if (entry.parts) paintParts(entry);
    paintStopBadge(entry);
  }

  function paintStopBadge(entry) {
    if (!entry.stops.size) {
      if (entry.badge) entry.badge.group.setAttribute('display', 'none');
      return;
    }
    if (!entry.badge) {
      const group = s('g', { class: 'stop-marker' });
      const enterBar = s('rect', { class: 'stop-bar stop-bar-enter', x: 0, y: 0, width: 6, height: NODE_H, rx: 2 });
      const completeBar = s('rect', {
        class: 'stop-bar stop-bar-complete', x: NODE_W - 6, y: 0, width: 6, height: NODE_H, rx: 2,
      });
      const pill = s('rect', { class: 'stop-pill', y: -9, height: 15, rx: 7.5, ry: 7.5 });
      const text = s('text', { class: 'stop-text', y: 2 });
      group.append(enterBar, completeBar, pill, text);
      entry.g.appendChild(group);
      entry.badge = { group, enterBar, completeBar, pill, text };
    }
    const badge = entry.badge;
    const enter = entry.stops.has('on_enter');
    const complete = entry.stops.has('on_complete');
    const label = `■ stop ${enter && complete ? 'on enter + complete' : enter ? 'on enter' : 'on complete'}`;
    const width = label.length * 6.1 + 14;
    badge.group.removeAttribute('display');
    badge.enterBar.setAttribute('display', enter ? 'inline' : 'none');
    badge.completeBar.setAttribute('display', complete ? 'inline' : 'none');
    badge.pill.setAttribute('x', NODE_W - width - 12);
    badge.pill.setAttribute('width', width);
    badge.text.setAttribute('x', NODE_W - width - 5);
    badge.text.textContent = label;
  }

  function applyZoom() {
    const zoom = ZOOMS[st.zoomIndex];
    const svg = $('#tree');
    svg.setAttribute('width', Math.ceil(st.size.width * zoom));
    svg.setAttribute('height', Math.ceil(st.size.height * zoom));
    $('#zoom-level').textContent = `${Math.round(zoom * 100)}%`;
    scheduleHydrate();
  }

  function zoomBy(step) {
    const scroller = $('#tree-scroll');
    const before = ZOOMS[st.zoomIndex];
    const next = step === 0 ? ZOOMS.indexOf(1) : Math.min(ZOOMS.length - 1, Math.max(0, st.zoomIndex + step));
    if (next === st.zoomIndex) return;
    const cx = (scroller.scrollLeft + scroller.clientWidth / 2) / before;
    const cy = (scroller.scrollTop + scroller.clientHeight / 2) / before;
    st.zoomIndex = next;
    applyZoom();
    const after = ZOOMS[next];
    scroller.scrollTo(cx * after - scroller.clientWidth / 2, cy * after - scroller.clientHeight / 2);
  }

  function gotoRunning() {
    let target = null;
    for (const entry of st.ops.values()) {
      if (entry.op.state !== 'running') continue;
      const busyChild = (entry.op.children || []).some((id) => {
        const child = st.ops.get(id);
        return child && child.op.state === 'running';
      });
      if (!busyChild) {
        target = entry;
        break;
      }
    }
    if (!target) {
      showMessage('info', 'no op of this plan is running');
      return;
    }
    scrollToOp(target);
    selectOp(target.op.op_id);
  }

  function scrollToOp(entry) {
    const scroller = $('#tree-scroll');
    const zoom = ZOOMS[st.zoomIndex];
    const x = (entry.x + NODE_W / 2) * zoom;
    const y = (entry.y + NODE_H / 2) * zoom;
    scroller.scrollTo(x - scroller.clientWidth / 2, y - scroller.clientHeight / 2);
  }

  // ---------------------------------------------------------------- live updates

  function applyNodeEvent(event, replayed) {
    if (event.event === 'step_transition') {
      markTaken(event.step, event.outcome);
      const path = st.tree ? st.tree.path || [] : [];
      // A replayed transition may be in the path read already (a step's self-loop may be missed then).
      if (st.tree && !(replayed && path[path.length - 1] === event.step)) {
        st.tree.path = path.concat([event.step]);
        if (event.state) st.tree.state = event.state;
        st.detailsDirty = true;
        schedule();
      }
      return;
    }
    const entry = st.ops.get(event.op_id);
    if (!entry) return;
    const op = { ...entry.op, state: event.state, detail: event.detail === undefined ? null : event.detail };
    if ('result' in event) op.result = event.result;
    if (event.state === 'running' && !op.started_at) op.started_at = event.time;
    if (FINAL_STATES.has(event.state)) op.ended_at = event.time;
    if (event.state === 'running' && FINAL_STATES.has(entry.op.state)) {  // a step run again
      op.started_at = event.time;
      op.ended_at = null;
      op.result = null;
    }
    entry.op = op;
    markDirty(op.op_id);
  }

  function onEvent(event) {
    logEvent(event);
    switch (event.event) {
      case 'node_state':
      case 'step_transition':
        if (event.plan_id !== st.selectedPlan) return;
        if (st.buffer !== null && st.bufferPlan === event.plan_id) st.buffer.push(event);
        else if (st.renderedPlan === event.plan_id) applyNodeEvent(event);
        return;
      case 'plan_started':
        refreshLists();
        return;
      case 'plan_complete':
        refreshLists();
        if (event.plan_id === st.selectedPlan) {
          if (st.tree) {
            st.tree.running = false;
            st.tree.outcome = event.outcome;
            st.tree.cancelled = event.cancelled;
            renderStatus();
          }
          reloadSelected();
        }
        return;
      case 'dropped':
        st.missed += event.count;
        if (!st.droppedNote || !st.droppedNote.isConnected) st.droppedNote = showMessage('warn', '');
        st.droppedNote.querySelector('.msg-text').textContent =
          `the console fell behind and missed ${st.missed} event(s); the view was read again`;
        refreshLists();
        reloadSelected();
        return;
      default:
    }
  }

  function connectEvents() {
    // EventSource cannot send headers: the token, when there is one, goes in the query.
    const source = new EventSource('/api/events' + (st.token ? '?token=' + encodeURIComponent(st.token) : ''));
    st.events = source;
    const connection = $('#connection');
    source.addEventListener('open', () => {
      connection.textContent = '● live';
      connection.className = 'connection conn-live';
      // First connection or a reconnect: whatever happened while not listening is read again
      // (a tree read before the stream was open may have missed events, so it is read again too).
      loadRecentEvents();
      refreshLists();
      reloadSelected();
    });
    source.addEventListener('error', () => {
      const closed = source.readyState === EventSource.CLOSED;
      connection.textContent = closed ? '✗ disconnected' : '◌ reconnecting…';
      connection.className = `connection ${closed ? 'conn-down' : 'conn-connecting'}`;
    });
    source.addEventListener('message', (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch (err) {
        showMessage('error', `unreadable event from the server: ${err.message}`);
        return;
      }
      onEvent(event);
    });
  }

  // ---------------------------------------------------------------- event log

  async function loadRecentEvents() {
    if (st.logHold !== null) return;
    st.logHold = [];
    let recent = [];
    try {
      recent = (await api('GET', '/api/events/recent')).events || [];
    } catch (err) {
      report(err);
    }
    const held = st.logHold;
    st.logHold = null;
    for (const event of recent) logEvent(event);
    for (const event of held) logEvent(event);
  }

  function logEvent(event) {
    if (st.logHold !== null) {
      st.logHold.push(event);
      return;
    }
    if (typeof event.seq === 'number') {
      if (event.seq <= st.lastLogSeq) return;
      st.lastLogSeq = event.seq;
    }
    st.logQueue.push(event);
    if (st.logQueue.length > LOG_MAX) st.logQueue.splice(0, st.logQueue.length - LOG_MAX);
    schedule();
  }

  function describeEvent(event) {
    switch (event.event) {
      case 'node_state': {
        let text = `op ${event.op_id} (${event.kind}) ${SYMBOL[event.state] || ''} ${event.state}`;
        const error = event.result && event.result.error;
        if (error) text += ` — ${error}`;
        else if (event.detail) text += ` — ${event.detail}`;
        return text;
      }
      case 'step_transition':
        return `${event.step} ${event.skill}: ${event.outcome} → ${event.next}`;
      case 'plan_started':
        return `started “${event.description || ''}” · ${event.op_count} ops · ${event.dialect}`;
      case 'plan_complete':
        return `${OUTCOME_SYMBOL[event.outcome] || ''} ${event.outcome}` +
          (event.terminal ? ` · ${event.terminal}` : '') + (event.terminal_reason ? ` (${event.terminal_reason})` : '');
      case 'dropped':
        return `${event.count} event(s) dropped: the view was reloaded`;
      default:
        return JSON.stringify(event);
    }
  }

  function flushLog() {
    if (!st.logQueue.length) return;
    const list = $('#event-log');
    const fragment = document.createDocumentFragment();
    for (let i = st.logQueue.length - 1; i >= 0; i -= 1) {
      const event = st.logQueue[i];
      const kind = event.event || 'event';
      const state = event.state || event.outcome || '';
      fragment.appendChild(h('li', { class: `log-entry log-${kind}${state ? ` log-state-${state}` : ''}` },
        h('time', { class: 'log-time', text: clock(event.time) }),
        h('span', { class: 'log-plan', text: event.plan_id ? `#${event.plan_id}` : '' }),
        h('span', { class: 'log-kind', text: kind.replace('_', ' ') }),
        h('span', { class: 'log-text', text: describeEvent(event) })));
    }
    st.logQueue = [];
    list.insertBefore(fragment, list.firstChild);
    while (list.childElementCount > LOG_MAX) list.lastElementChild.remove();
  }

  // ---------------------------------------------------------------- details panel

  function fact(list, name, value, cls) {
    if (value === null || value === undefined || value === '') return;
    list.append(h('dt', { text: name }), h('dd', { class: cls || null, text: String(value) }));
  }

  function renderDetails() {
    const tree = st.tree;
    const running = Boolean(tree && tree.running);
    $('#pi-id').textContent = st.selectedPlan === null ? '—' : st.selectedPlan;
    const planFacts = $('#plan-facts');
    clear(planFacts);
    const world = $('#world-state');
    if (tree) {
      const state = planState();
      fact(planFacts, 'State', `${OUTCOME_SYMBOL[state] || '•'} ${state}`, `outcome-${state}`);
      fact(planFacts, 'Description', tree.description);
      fact(planFacts, 'Dialect', tree.dialect);
      fact(planFacts, 'Ops', tree.ops.length);
      if (tree.run_id) fact(planFacts, 'Run id', tree.run_id);
      if (tree.cancel_reason) fact(planFacts, 'Cancelled', tree.cancel_reason);
      if (tree.error) fact(planFacts, 'Error', tree.error, 'error-text');
      if (tree.duration_s) fact(planFacts, 'Duration', duration(tree.duration_s));
      if (tree.transitions) fact(planFacts, 'Path', (tree.path || []).join(' → ') || '(not started)');
      world.hidden = !tree.state;
      if (tree.state) $('#world-state-json').textContent = pretty(tree.state);
    } else {
      world.hidden = true;
    }
    document.querySelector('[data-action="cancel-plan"]').disabled = !running;

    const entry = st.selectedOp === null ? null : st.ops.get(st.selectedOp);
    $('#op-title').textContent = entry ? entry.op.op_id : '—';
    $('#op-hint').hidden = Boolean(entry);
    for (const when of ['on_enter', 'on_complete']) {
      const button = document.querySelector(`[data-action="stop-${when}"]`);
      button.disabled = !(entry && running);
      button.classList.toggle('armed', Boolean(entry && entry.stops.has(when)));
      button.setAttribute('aria-pressed', entry && entry.stops.has(when) ? 'true' : 'false');
    }
    const opFacts = $('#op-facts');
    const blocks = $('#op-blocks');
    clear(opFacts);
    clear(blocks);
    if (!entry) return;
    const op = entry.op;
    fact(opFacts, 'Id', op.op_id);
    fact(opFacts, 'Kind', op.kind);
    fact(opFacts, 'Cap', op.cap);
    fact(opFacts, 'State', `${SYMBOL[op.state] || '•'} ${op.state}`, `state-text-${op.state}`);
    fact(opFacts, 'Stop point', [...entry.stops].join(', ') || 'none');
    if (op.children && op.children.length) fact(opFacts, 'Children', op.children.join(', '));
    fact(opFacts, 'Started', clock(op.started_at));
    if (op.ended_at) fact(opFacts, 'Ended', `${clock(op.ended_at)}${op.started_at ? ` (${duration(op.ended_at - op.started_at)})` : ''}`);
    if (tree && tree.transitions && tree.transitions[op.op_id]) {
      fact(opFacts, 'Transitions', Object.entries(tree.transitions[op.op_id]).map(([k, v]) => `${k} → ${v}`).join(', '));
    }
    blocks.append(h('h4', { text: 'Description' }), h('p', { class: 'full-desc', text: op.description || '(none)' }));
    const error = op.result && typeof op.result === 'object' ? op.result.error : null;
    if (error) blocks.append(h('h4', { text: 'Error' }), h('pre', { class: 'error-text', text: pretty(error) }));
    if (op.detail !== null && op.detail !== undefined) {
      blocks.append(h('h4', { text: 'Detail' }), h('pre', { text: pretty(op.detail) }));
    }
    blocks.append(h('h4', { text: 'Result' }),
      h('pre', {
        class: 'result',
        text: op.result === null || op.result === undefined
          ? (running && !FINAL_STATES.has(op.state) ? '(none yet)' : '(none)') : pretty(op.result),
      }));
  }

  function selectOp(opId) {
    const previous = st.selectedOp === null ? null : st.ops.get(st.selectedOp);
    st.selectedOp = opId;
    if (previous) paintOp(previous);
    const entry = st.ops.get(opId);
    if (entry) paintOp(entry);
    renderDetails();
  }

  // ---------------------------------------------------------------- control actions

  async function stopAt(when) {
    const planId = st.selectedPlan;
    const opId = st.selectedOp;
    if (planId === null || opId === null) return;
    try {
      const answer = await api('POST', planPath(planId, 'stop_at'), { op_id: opId, when });
      showMessage(answer.message && answer.message.includes('will not fire') ? 'warn' : 'info', answer.message);
      const entry = st.ops.get(opId);
      if (answer.armed && entry && planId === st.selectedPlan) {
        entry.stops.add(when);
        markDirty(opId);
        st.detailsDirty = true;
        schedule();
      }
      refreshLists();
    } catch (err) {
      report(err);
    }
  }

  async function cancelPlan() {
    const planId = st.selectedPlan;
    if (planId === null) return;
    try {
      const answer = await api('POST', planPath(planId, 'cancel'), { wait_ms: 5000 });
      showMessage(answer.finished ? 'info' : 'warn', answer.message);
    } catch (err) {
      report(err);
    }
  }

  async function cancelAll() {
    try {
      const answer = await api('POST', '/api/cancel_all', { wait_ms: 5000 });
      showMessage(answer.finished ? 'info' : 'warn', answer.message);
    } catch (err) {
      report(err);
    }
  }

  // ---------------------------------------------------------------- submit panel

  function readDocument() {
    const text = $('#plan-text').value;
    if (!text.trim()) return null;
    try {
      return { text, doc: JSON.parse(text) };
    } catch (err) {
      return { text, doc: undefined };
    }
  }

  async function validateOrSubmit(submit) {
    const input = readDocument();
    if (input === null) {
      showMessage('error', 'paste a plan or load a file first');
      $('#plan-text').focus();
      return;
    }
    const dialect = $('#dialect').value;
    const graph = input.doc !== null && typeof input.doc === 'object' ? input.doc : input.text;
    const outline = buildOutline(input.doc, dialect);
    const verdict = $('#verdict');
    verdict.textContent = submit ? 'submitting…' : 'validating…';
    verdict.className = 'verdict';
    let answer;
    try {
      answer = await api('POST', submit ? '/api/plans' : '/api/validate', { graph, dialect });
    } catch (err) {
      verdict.textContent = '';
      report(err);
      return;
    }
    const issues = answer.issues || [];
    const ok = submit ? answer.accepted : answer.valid;
    if (submit) {
      verdict.textContent = ok
        ? `✓ accepted: ${answer.message}`
        : `✗ refused (${answer.verdict}): ${issues.length} issue${issues.length === 1 ? '' : 's'}`;
    } else {
      const stats = answer.stats && Object.keys(answer.stats).length
        ? ' · ' + Object.entries(answer.stats).map(([k, v]) => `${k} ${v}`).join(', ') : '';
      verdict.textContent = ok
        ? `✓ valid ${answer.dialect || ''}${stats}`
        : `✗ ${answer.verdict}: ${issues.length} issue${issues.length === 1 ? '' : 's'}${stats}`;
    }
    verdict.className = `verdict ${ok ? 'verdict-ok' : 'verdict-bad'}`;
    showIssues(issues, outline);
    if (submit && ok) {
      showMessage('info', answer.message);
      if (answer.plan_id) {
        st.followedUpTo = Math.max(st.followedUpTo, Number(answer.plan_id) || 0);
        selectPlan(answer.plan_id);
        refreshLists();
      }
    } else if (submit && answer.verdict === 'control' && answer.message) {
      showMessage('info', answer.message);
    }
  }

  function detectDialect(doc, dialect) {
    if (dialect !== 'auto') return dialect;
    if (!doc || typeof doc !== 'object') return null;
    if ('rtdl' in doc || 'op' in doc || 'nodes' in doc) return 'rtdl';
    if ('response' in doc || 'plan' in doc || 'status' in doc) return 'qwen3';
    return null;
  }

  function parseResponse(response) {
    if (response && typeof response === 'object') return response;
    if (typeof response !== 'string') return null;
    let text = response.trim();
    const fenced = /^```[a-zA-Z0-9]*\s*\n([\s\S]*?)\n?```\s*$/.exec(text);
    if (fenced) text = fenced[1];
    try {
      return JSON.parse(text);
    } catch (err) {
      return null;
    }
  }

  // The document's nodes, each with the JSON pointer of its place (issue paths point inside them).
  function outlineRows(doc, dialect) {
    const rows = [];
    const kind = detectDialect(doc, dialect);
    if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return rows;
    if (kind === 'rtdl' && Array.isArray(doc.nodes)) {
      const kinds = { 0: 'sequence', 1: 'parallel', 2: 'do' };
      const depth = new Map();
      const order = [];
      const visit = (index, level) => {
        if (depth.has(index) || !doc.nodes[index] || level > 200) return;
        depth.set(index, level);
        order.push(index);
        const children = Array.isArray(doc.nodes[index].children) ? doc.nodes[index].children : [];
        for (const child of children) if (Number.isInteger(child)) visit(child, level + 1);
      };
      if (Number.isInteger(doc.root_index)) visit(doc.root_index, 0);
      doc.nodes.forEach((_, index) => visit(index, 0));
      for (const index of order) {
        const node = doc.nodes[index] || {};
        const call = node.call && typeof node.call === 'object' ? node.call : {};
        rows.push({
          pointer: `/nodes/${index}`, depth: depth.get(index), label: `nodes[${index}]`,
          kind: kinds[node.node_kind] || `node_kind ${node.node_kind}`, id: node.op_id,
          desc: node.description, extra: call.contract_id || '',
        });
      }
      return rows;
    }
    if (kind === 'rtdl') {
      const rootPointer = 'rtdl' in doc ? '/rtdl' : '';
      const root = 'rtdl' in doc ? doc.rtdl : doc;
      const walk = (node, pointer, level) => {
        if (!node || typeof node !== 'object' || level > 200) return;
        rows.push({
          pointer, depth: level, label: pointer || '/', kind: node.op, id: node.op_id, desc: node.description,
          extra: node.cap || '',
        });
        if (Array.isArray(node.children)) {
          node.children.forEach((child, index) => walk(child, `${pointer}/children/${index}`, level + 1));
        }
      };
      walk(root, rootPointer, 0);
      return rows;
    }
    if (kind === 'qwen3') {
      const base = 'response' in doc ? '/response' : '';
      const graph = 'response' in doc ? parseResponse(doc.response) : doc;
      if (!graph || typeof graph !== 'object') return rows;
      const transitions = graph.transitions;
      const edgesOf = (stepId) => {
        if (Array.isArray(transitions)) {
          return transitions.filter((t) => t && t.from === stepId).map((t) => `${t.event} → ${t.to}`);
        }
        if (transitions && typeof transitions === 'object' && transitions[stepId]) {
          return Object.entries(transitions[stepId]).map(([k, v]) => `${k} → ${v}`);
        }
        return [];
      };
      (Array.isArray(graph.plan) ? graph.plan : []).forEach((step, index) => {
        if (!step || typeof step !== 'object') return;
        const args = step.args && typeof step.args === 'object' ? Object.values(step.args) : [];
        const objects = [step.object, step.target, ...args].filter((v) => typeof v === 'string');
        rows.push({
          pointer: `${base}/plan/${index}`, depth: 0, label: `plan[${index}]`, kind: step.skill,
          id: step.id, step: step.id, desc: objects.length ? `(${objects.join(', ')})` : '',
          extra: (step.id === graph.entry ? 'entry · ' : '') + edgesOf(step.id).join(', '),
        });
      });
      rows.base = base;
      rows.transitions = transitions;
    }
    return rows;
  }

  function normalisePath(path) {
    if (!path) return '';
    if (path.startsWith('/')) return path;
    return '/' + path.replace(/\[(\d+)\]/g, '.$1').split('.').filter(Boolean).join('/');
  }

  function buildOutline(doc, dialect) {
    const list = $('#outline');
    clear(list);
    const rows = outlineRows(doc, dialect);
    for (const row of rows) {
      const showId = row.id !== undefined && row.id !== null && row.id !== 0 && row.id !== '';
      const line = h('div', { class: 'o-line' },
        h('span', { class: 'o-marker', 'aria-hidden': 'true' }),
        h('span', { class: 'o-kind', text: row.kind || '?' }),
        showId ? h('span', { class: 'o-id', text: `#${row.id}` }) : null,
        h('span', { class: 'o-desc', text: row.desc || '', title: row.desc || '' }),
        row.extra ? h('span', { class: 'o-extra', text: truncate(row.extra, 120) }) : null,
        h('span', { class: 'o-label', text: row.label }));
      const item = h('li', {
        class: 'outline-node', 'data-path': row.pointer, 'data-step': row.step || null,
      }, line);
      item.style.paddingLeft = `${0.4 + Math.min(row.depth, 30) * 1.2}rem`;
      row.el = item;
      list.appendChild(item);
    }
    $('#outline-empty').hidden = rows.length > 0;
    $('#outline-empty').textContent = rows.length ? '' : (doc === undefined
      ? 'The text is not JSON: no outline (see the issues).'
      : 'No nodes recognised in this document.');
    return rows;
  }

  // The outline row an issue belongs to: its steps, else the longest pointer prefix of its path.
  function rowsForIssue(issue, rows) {
    const found = new Set();
    for (const step of issue.steps || []) {
      for (const row of rows) if (row.step === step) found.add(row);
    }
    if (found.size) return found;
    let path = normalisePath(issue.path || '');
    if (!path) return found;
    const transition = rows.transitions !== undefined
      ? new RegExp(`^${rows.base || ''}/transitions/([^/]+)`).exec(path) : null;
    if (transition) {
      const key = transition[1];
      const from = Array.isArray(rows.transitions) ? (rows.transitions[Number(key)] || {}).from : key;
      for (const row of rows) if (row.step === from) found.add(row);
      if (found.size) return found;
    }
    let best = null;
    for (const row of rows) {
      const pointer = row.pointer;
      if ((path === pointer || path.startsWith(pointer + '/') || pointer === '') &&
          (best === null || pointer.length > best.pointer.length)) best = row;
    }
    if (best) found.add(best);
    return found;
  }

  function showIssues(issues, rows) {
    const list = $('#issues');
    clear(list);
    $('#issue-count').textContent = String(issues.length);
    for (const issue of issues) {
      const where = [issue.path ? `at ${issue.path}` : '', issue.steps && issue.steps.length ? `steps ${issue.steps.join(', ')}` : '']
        .filter(Boolean).join(' · ');
      const targets = rowsForIssue(issue, rows);
      const item = h('li', { class: 'issue' },
        h('span', { class: 'issue-code', text: issue.code }),
        where ? h('span', { class: 'issue-where', text: where }) : null,
        h('span', { class: 'issue-message', text: issue.message }));
      if (targets.size) {
        const show = h('button', { type: 'button', class: 'link', text: 'show node' });
        show.addEventListener('click', () => {
          const first = [...targets][0].el;
          first.scrollIntoView({ block: 'nearest' });
          first.classList.add('flash');
          setTimeout(() => first.classList.remove('flash'), 1200);
        });
        item.appendChild(show);
      }
      list.appendChild(item);
      for (const row of targets) {
        if (!row.el.classList.contains('has-issue')) {
          row.el.classList.add('has-issue');
          row.el.querySelector('.o-marker').textContent = '⚠';
          row.el.setAttribute('aria-invalid', 'true');
          row.el.appendChild(h('ul', { class: 'issue-notes' }));
        }
        row.el.querySelector('.issue-notes').appendChild(
          h('li', null, h('code', { text: issue.code }), ' ', issue.message));
      }
    }
    if (!issues.length) list.appendChild(h('li', { class: 'empty', text: 'No issues.' }));
  }

  async function loadFile(file) {
    if (!file) return;
    try {
      $('#plan-text').value = await file.text();
      showMessage('info', `loaded ${file.name} (${file.size} bytes)`);
    } catch (err) {
      showMessage('error', `cannot read ${file.name}: ${err.message}`);
    }
  }

  // ---------------------------------------------------------------- wiring

  function onClick(event) {
    const plan = event.target.closest('[data-plan-id]');
    if (plan && plan.classList.contains('plan-item')) {
      selectPlan(plan.dataset.planId);
      return;
    }
    const op = event.target.closest('g.op');
    if (op) {
      selectOp(op.getAttribute('data-op-id'));
      return;
    }
    const action = event.target.closest('[data-action]');
    if (!action || action.disabled) return;
    switch (action.dataset.action) {
      case 'stop-on_enter': stopAt('on_enter'); break;
      case 'stop-on_complete': stopAt('on_complete'); break;
      case 'cancel-plan': cancelPlan(); break;
      case 'cancel-all': cancelAll(); break;
      case 'validate': validateOrSubmit(false); break;
      case 'submit': validateOrSubmit(true); break;
      case 'zoom-in': zoomBy(1); break;
      case 'zoom-out': zoomBy(-1); break;
      case 'zoom-reset': zoomBy(0); break;
      case 'goto-running': gotoRunning(); break;
      default:
    }
  }

  function onKey(event) {
    if (event.key !== 'Enter' && event.key !== ' ') return;
    const op = event.target.closest && event.target.closest('g.op');
    if (op) {
      event.preventDefault();
      selectOp(op.getAttribute('data-op-id'));
    }
  }

  async function loadInfo() {
    try {
      st.info = await api('GET', '/api/info');
    } catch (err) {
      report(err);
      return;
    }
    const field = $('#token-field');
    field.hidden = !st.info.token_required;
    if (st.info.token_required && !st.token) showMessage('warn', 'this server needs a token for control actions: enter it at the top right');
  }

  function init() {
    document.addEventListener('click', onClick);
    $('#tree').addEventListener('keydown', onKey);
    $('#tree-scroll').addEventListener('scroll', scheduleHydrate, { passive: true });
    window.addEventListener('resize', scheduleHydrate);
    const token = $('#token');
    token.value = st.token;
    token.addEventListener('input', () => {
      st.token = token.value.trim();
      if (st.token) sessionStorage.setItem(TOKEN_KEY, st.token);
      else sessionStorage.removeItem(TOKEN_KEY);
      // A stream refused for want of the token (beyond loopback), or still trying, is opened again with it.
      if (st.events && st.events.readyState !== EventSource.OPEN) {
        st.events.close();
        connectEvents();
      }
    });
    $('#token-field').addEventListener('submit', (event) => event.preventDefault());
    $('#plan-file').addEventListener('change', (event) => loadFile(event.target.files[0]));
    $('#follow').addEventListener('change', (event) => {
      if (event.target.checked && st.running[0]) selectPlan(st.running[0].plan_id);
    });
    renderDetails();
    loadInfo();
    connectEvents();  // once open, it reads the lists and the selected tree: one read, no events missed
  }

  window.addEventListener('error', (event) => showMessage('error', `console bug: ${event.message}`));
  window.addEventListener('unhandledrejection', (event) => showMessage('error', `console bug: ${event.reason}`));
  init();
})();
