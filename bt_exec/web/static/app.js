// bt_exec operator console: plain JavaScript, no libraries, no build step.
//
// Data flow: the plan lists and a plan's tree are fetched from the JSON API;
// afterwards every change arrives on the event stream (EventSource /api/events)
// and is applied in place: a node_state event updates that op's entry (a Map
// op_id -> entry) and the leaf counts of the composites above it; only the ops
// in and around the view have SVG nodes, and DOM writes are batched in
// requestAnimationFrame, so a tree of 10,000 ops stays responsive. Nothing is polled but a simulated
// cell's arm (startCellView), which moves continuously and no event carries.
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
  const OUTCOME_SYMBOL = { succeeded: '✓', failed: '✗', cancelled: '⊘', running: '▶', cancelling: '⊘', paused: '‖' };
  const WHEN_WORDS = { on_enter: 'on enter', on_complete: 'on complete' };
  const FINAL_STATES = new Set(['succeeded', 'failed', 'canceled', 'timeout']);
  const LOG_MAX = 500;
  const LOG_PER_FRAME = 40;
  const FINISHED_LIMIT = 30;
  const TOKEN_KEY = 'bt_exec.token';

  // Tree geometry (SVG user units = CSS px at zoom 100%).
  const NODE_W = 212;
  const NODE_H = 58;
  const COL_W = 236;     // horizontal distance between depths
  const ROW_H = 70;      // vertical distance between leaf slots
  const PAD = 12;
  const MAX_PARENT_DROP = 3;  // rows
  const DESC_CHARS = 31;
  const HEAD_CHARS = 16;    // leaves room for the state word on the right
  const SUB_CHARS = 31;
  const MAX_PULSING = 20;   // more running ops than this: no pulse (each pulse repaints every frame)
  const ERROR_CHARS = 30;   // the error line of a failed op's box
  const TOGGLE_R = 9;       // the open/close button on a composite's right edge
  const SMALL_PLAN = 100;   // plans up to this many ops open every composite
  const ARGS_TOOLTIP_CHARS = 300;
  // Step graphs.
  const G_COL_W = NODE_W + 118;
  const GRAPH_MIN_ZOOM = 0.5;  // a step graph opens at the zoom that fits its width (at most 100%), down to this
  const G_ROW_H = NODE_H + 58;
  const TERM_W = 150;
  const TERM_H = 34;
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
    cell: null,             // the simulated cell's view: drawings made, their rate (startCellView)
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    events: null,           // the EventSource of /api/events
    running: [],
    finished: [],
    selectedPlan: null,
    followedUpTo: 0,        // newest running plan id already followed
    tree: null,             // the selected plan's tree view (metadata; ops live in `ops`)
    renderedPlan: null,
    ops: new Map(),         // op_id -> {op, parent, x, y, shown, open, counts, leaves, g, parts, stops:Set, fired,
                            //           fullArgs}
    visible: [],            // the laid-out entries, in tree order
    userOpen: new Map(),    // composite op_id -> opened (true) or closed (false) by the operator
    graph: null,            // a step graph's edges, labels, terminals and trace
    edgeLayer: null,
    nodeLayer: null,
    search: { query: '', matches: [], set: new Set(), index: -1 },
    colours: null,
    selectedOp: null,
    buffer: null,           // node events that arrived while a tree fetch was in flight
    bufferPlan: null,
    treeRequest: 0,
    dirty: new Set(),
    detailsDirty: false,
    frameRequested: false,
    windowRequested: false,
    layoutDirty: false,
    minimapDirty: false,
    statesChanged: false,
    logQueue: [],
    logHold: null,          // events held while /api/events/recent is being read
    lastLogSeq: 0,
    zoom: 1,                // the tree's scale: one of ZOOMS, or the one that fits a step graph's width
    size: { width: 0, height: 0 },
    listsBusy: false,
    listsAgain: false,
    listsRead: false,       // the lists were read once (a plan named in the address is selected then)
    loadFailed: false,
    missed: 0,              // events the server dropped for this page
    droppedNote: null,
    rereadTimer: null,      // a re-read of the tree pending (what a paused plan holds, whether a step is pending)
    replay: null,           // served by bt-exec replay: its clock {position, count, time, playing, speed, ...}
    robot: null,            // served by bt-exec fleet: the robot every request and event is about
    robots: [],             // the fleet's robots as list_robots gave them
    replayDragging: false,
    connection: 'connecting',  // the event stream: connecting, open, reconnecting, down, or closed (by the server)
    closingMessage: null,   // what the server said as it closed on purpose (its server_closing event)
  };

  // ---------------------------------------------------------------- messages

  // A BT XML control op runs as a named BehaviorTree.CPP node (ReactiveSequence, Retry...): shown by that name.
  function kindShown(op) {
    return op.node || op.kind;
  }

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
    path = robotPath(path);
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

  // A fleet's app serves each robot's operations under /api/robots/ROBOT/..., and its events with ?robot=ROBOT.
  const FLEET_WIDE = new Set(['/api/info', '/api/robots']);

  function robotPath(path) {
    if (st.robot === null || FLEET_WIDE.has(path) || !path.startsWith('/api/')) return path;
    if (path.startsWith('/api/events')) return withQuery(path, 'robot', st.robot);
    return `/api/robots/${encodeURIComponent(st.robot)}/${path.slice('/api/'.length)}`;
  }

  function withQuery(path, name, value) {
    return `${path}${path.includes('?') ? '&' : '?'}${name}=${encodeURIComponent(value)}`;
  }

  // ---------------------------------------------------------------- frame batching

  function schedule() {
    if (st.frameRequested) return;
    st.frameRequested = true;
    requestAnimationFrame(flush);
  }

  function flush() {
    st.frameRequested = false;
    if (st.layoutDirty) relayout();
    if (st.dirty.size) {
      for (const opId of st.dirty) {
        const entry = st.ops.get(opId);
        if (entry && entry.g) paintOp(entry);
      }
      st.dirty.clear();
      updateCalm();
    }
    if (st.statesChanged) {
      st.statesChanged = false;
      followRunning();
    }
    if (st.minimapDirty) drawMinimap();
    if (st.detailsDirty) {
      st.detailsDirty = false;
      renderDetails();
    }
    flushLog();
  }

  function updateCalm() {
    let running = 0;
    for (const entry of st.visible) if (entry.g && entry.op.state === 'running') running += 1;
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

  function planInAddress() {
    const found = /^#plan=(.+)$/.exec(location.hash);
    return found ? decodeURIComponent(found[1]) : null;
  }

  function autoSelect() {
    const newest = st.running[0];
    const asked = st.listsRead ? null : planInAddress();
    st.listsRead = true;
    if (asked !== null) {  // a link to a plan (#plan=ID) wins over following the newest, at first
      if (newest) st.followedUpTo = Math.max(st.followedUpTo, Number(newest.plan_id));
      if (asked !== st.selectedPlan) selectPlan(asked);
      return;
    }
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
    const state = finished ? plan.outcome : (plan.cancelled ? 'cancelling' : (plan.paused ? 'paused' : 'running'));
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
    const failure = finished && state === 'failed' ? plan.failed_op : null;
    if (failure) {
      const text = failureText(failure);
      button.appendChild(h('span', { class: 'plan-fail-line', text: `✗ ${truncate(text, 80)}`, title: text }));
    }
    return h('li', null, button);
  }

  function failureText(failure) {
    return `op ${failure.op_id}${failure.description ? ` “${truncate(failure.description, 40)}”` : ''}` +
      (failure.error ? `: ${failure.error}` : ' failed');
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
    history.replaceState(null, '', `#plan=${encodeURIComponent(planId)}`);
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
        st.tree = null;  // nothing of the plan is shown: neither its state nor its controls
        clearTree(`Plan ${planId} cannot be shown: ${err.message}`);
        renderStatus();
        if (!st.replay) report(err);  // a replay moved back before the plan started: the tree says so
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
    if (tree.running) return tree.cancelled ? 'cancelling' : (tree.paused ? 'paused' : 'running');
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
    const failure = state === 'failed' ? st.tree.failed_op : null;
    if (st.tree.cancel_reason && state !== 'running') text += ` (${st.tree.cancel_reason})`;
    else if (failure) text += ` at ${failureText(failure)}`;
    else if (st.tree.error) text += ` (${st.tree.error})`;
    clear(status);
    status.appendChild(h('span', { class: 'status-text', text }));
    status.title = text;
    status.className = `status outcome-${state}`;
    if (failure) {
      status.appendChild(h('button', {
        type: 'button', class: 'link status-link', 'data-action': 'goto-failed', 'data-op-id': failure.op_id, text: 'show',
      }));
    }
  }

  // ---------------------------------------------------------------- tree model
  //
  // Every op of the plan has an entry in st.ops; only the ops in view (and a viewport around it) have
  // SVG nodes: a plan of 10,000 ops lays out in a few milliseconds and draws the hundred boxes one sees.
  // Composites count their leaves by state (kept up to date as events arrive), which gives their
  // `done/total`, their progress bar and whether they open by default.

  function isLeaf(entry) {
    return !(entry.op.children && entry.op.children.length);
  }

  function emptyCounts() {
    return { pending: 0, running: 0, paused: 0, succeeded: 0, failed: 0, canceled: 0, timeout: 0 };
  }

  function ancestors(entry, visit) {
    let hops = 0;
    for (let id = entry.parent; id !== null && hops < 10000; hops += 1) {
      const above = st.ops.get(id);
      if (!above) return;
      visit(above);
      id = above.parent;
    }
  }

  function recount() {
    for (const entry of st.ops.values()) {
      entry.counts = emptyCounts();
      entry.leaves = 0;
    }
    for (const entry of st.ops.values()) {
      if (!isLeaf(entry)) continue;
      const state = entry.op.state;
      ancestors(entry, (above) => {
        above.leaves += 1;
        if (state in above.counts) above.counts[state] += 1;
      });
    }
  }

  function buildModel(tree) {
    st.ops = new Map();
    for (const op of tree.ops) {
      st.ops.set(op.op_id, {
        op, parent: null, x: 0, y: 0, shown: false, open: false, g: null, parts: null, badge: null,
        counts: emptyCounts(), leaves: 0, stops: stopsOf(op, tree, null), fired: null, fullArgs: undefined,
        argsTip: null, pauses: pausesOf(op, tree), held: Boolean(op.held),
      });
    }
    for (const entry of st.ops.values()) {
      for (const child of entry.op.children || []) {
        const below = st.ops.get(child);
        if (below && below.parent === null && below !== entry && child !== tree.root) below.parent = entry.op.op_id;
      }
    }
    recount();
  }

  // A composite is open when the operator opened it, else when it is the root, the plan is small, or
  // it holds a running, paused or failed op: the path to what happens (or went wrong) is in view.
  function isOpen(entry) {
    const id = entry.op.op_id;
    if (st.userOpen.has(id)) return st.userOpen.get(id);
    if (entry.parent === null || st.ops.size <= SMALL_PLAN) return true;
    const counts = entry.counts;
    return counts.running + counts.paused + counts.failed + counts.timeout > 0;
  }

  function errorOf(op) {
    const error = op.result && typeof op.result === 'object' ? op.result.error : null;
    if (error) return typeof error === 'string' ? error : pretty(error);
    if ((op.state === 'failed' || op.state === 'timeout') && isLeafOp(op) && op.detail) return String(op.detail);
    return '';
  }

  function isLeafOp(op) {
    return !(op.children && op.children.length);
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
        entry.pauses = pausesOf(op, tree);
        entry.held = Boolean(op.held);
        if (entry.g) st.dirty.add(op.op_id);
      }
      recount();
      st.layoutDirty = true;
      st.minimapDirty = true;
      if (tree.transitions) loadTrace(tree);
    } else {
      buildTree(tree);
    }
    $('#plan-desc').textContent = tree.description || '';
    renderStatus();
    renderLists();
    st.detailsDirty = true;
    schedule();
  }

  // An op's armed stop points. The tree names one per op, on_enter when both are armed: on_complete is
  // then kept as the events said. A stop point the tree does not name is not armed.
  function stopsOf(op, tree, known) {
    if (!tree.running || !op.stop_point) return new Set();
    const stops = new Set([op.stop_point]);
    if (op.stop_point === 'on_enter' && known && known.has('on_complete')) stops.add('on_complete');
    return stops;
  }

  // An op's armed pause point, as the tree names it (one per op: on_enter when both are armed).
  function pausesOf(op, tree) {
    return tree.running && op.pause_point ? new Set([op.pause_point]) : new Set();
  }

  function clearTree(note) {
    clear($('#tree'));
    $('#tree').setAttribute('width', 0);
    $('#tree').setAttribute('height', 0);
    st.ops = new Map();
    st.visible = [];
    st.graph = null;
    st.renderedPlan = null;
    st.selectedOp = null;
    st.size = { width: 0, height: 0 };
    $('#plan-desc').textContent = '';
    $('#tree-empty').textContent = note;
    $('#tree-empty').hidden = false;
    st.minimapDirty = true;
    schedule();
    renderDetails();
  }

  function buildTree(tree) {
    const svg = $('#tree');
    clear(svg);
    st.dirty.clear();
    st.userOpen = new Map();
    st.renderedPlan = tree.plan_id;
    buildModel(tree);
    st.edgeLayer = s('g', { class: 'edges' });
    st.nodeLayer = s('g', { class: 'nodes' });
    st.graph = tree.transitions ? { transitions: tree.transitions } : null;
    svg.classList.toggle('step-graph', Boolean(st.graph));
    if (st.graph) {
      layoutGraph(tree);
      loadTrace(tree);
      // Fitted, so its terminals (the right-most column) are in view; wider than that even at the least
      // zoom, it scrolls.
      const fit = Math.floor(($('#tree-scroll').clientWidth - 2) / st.size.width * 100) / 100;
      st.zoom = Math.min(1, Math.max(GRAPH_MIN_ZOOM, fit));
    } else {
      layoutTree();
    }
    svg.append(st.edgeLayer, st.nodeLayer);
    applyZoom();
    $('#tree-empty').hidden = true;
    $('#tree-scroll').scrollTo(0, 0);
    applySearch();
    drawWindow();
    st.minimapDirty = true;
    schedule();
    const planId = tree.plan_id;
    // First paint of this plan: marked after the frame that shows it (the bench reads the mark).
    requestAnimationFrame(() => setTimeout(() => {
      if (st.renderedPlan === planId) performance.mark('bt-tree-drawn');
    }, 0));
  }

  // Tidy layout of the open part, depth left to right: leaves take consecutive rows, a parent is
  // centred on its children (never more than a few rows below the first).
  function layoutTree() {
    for (const entry of st.ops.values()) {
      entry.shown = false;
      entry.open = !isLeaf(entry) && isOpen(entry);
    }
    const visible = [];
    const links = [];
    let slot = 0;
    let maxDepth = 0;
    const place = (entry, depth) => {
      if (entry.shown) return null;
      entry.shown = true;
      visible.push(entry);
      maxDepth = Math.max(maxDepth, depth);
      entry.open = !isLeaf(entry) && isOpen(entry);
      const childYs = [];
      if (entry.open) {
        for (const id of entry.op.children) {
          const below = st.ops.get(id);
          if (!below || below.parent !== entry.op.op_id) continue;
          const y = place(below, depth + 1);
          if (y !== null) {
            childYs.push(y);
            links.push([entry, below]);
          }
        }
      }
      entry.x = PAD + depth * COL_W;
      entry.y = childYs.length
        ? Math.min((childYs[0] + childYs[childYs.length - 1]) / 2, childYs[0] + MAX_PARENT_DROP * ROW_H)
        : PAD + ROW_H * slot++;
      return entry.y;
    };
    const root = st.ops.get(st.tree.root);
    if (root) place(root, 0);
    for (const entry of st.ops.values()) if (entry.parent === null && !entry.shown) place(entry, 0);
    const gap = (COL_W - NODE_W) / 2;
    const path = [];
    for (const [above, below] of links) {
      const x1 = above.x + NODE_W;
      path.push(`M${x1} ${above.y + NODE_H / 2}H${x1 + gap}V${below.y + NODE_H / 2}H${below.x}`);
    }
    clear(st.edgeLayer);
    st.edgeLayer.appendChild(s('path', { class: 'edge', d: path.join('') }));
    for (const entry of st.ops.values()) {
      if (entry.g && !entry.shown) dropNode(entry);
      else if (entry.g) entry.g.setAttribute('transform', `translate(${entry.x},${entry.y})`);
    }
    st.visible = visible;
    st.size = {
      width: PAD * 2 + maxDepth * COL_W + NODE_W,
      height: PAD * 2 + Math.max(1, slot) * ROW_H - (ROW_H - NODE_H),
    };
  }

  function relayout() {
    st.layoutDirty = false;
    if (!st.tree || st.graph) return;
    layoutTree();
    applyZoom();
    drawWindow();
    st.minimapDirty = true;
  }

  // Nodes for the ops in view and one viewport around it; those two viewports away are dropped.
  function drawWindow() {
    st.windowRequested = false;
    if (!st.tree) return;
    const scroller = $('#tree-scroll');
    const zoom = st.zoom;
    const view = {
      left: scroller.scrollLeft / zoom, top: scroller.scrollTop / zoom,
      width: scroller.clientWidth / zoom, height: scroller.clientHeight / zoom,
    };
    const near = (entry, margin) => entry.x + NODE_W >= view.left - margin * view.width &&
      entry.x <= view.left + (1 + margin) * view.width &&
      entry.y + NODE_H >= view.top - margin * view.height && entry.y <= view.top + (1 + margin) * view.height;
    const fragment = document.createDocumentFragment();
    for (const entry of st.visible) {
      if (!entry.g && (st.graph || near(entry, 1))) fragment.appendChild(makeNode(entry));
      else if (entry.g && !st.graph && !near(entry, 2)) dropNode(entry);
    }
    st.nodeLayer.appendChild(fragment);
    updateCalm();
    st.minimapDirty = true;
    schedule();
  }

  function scheduleWindow() {
    if (st.windowRequested) return;
    st.windowRequested = true;
    requestAnimationFrame(drawWindow);
  }

  function dropNode(entry) {
    entry.g.remove();
    entry.g = null;
    entry.parts = null;
    entry.badge = null;
  }

  function makeNode(entry) {
    const op = entry.op;
    const g = s('g', {
      class: 'op', 'data-op-id': op.op_id, transform: `translate(${entry.x},${entry.y})`, tabindex: '0', role: 'button',
    });
    const title = s('title');
    const box = s('rect', { class: 'box', width: NODE_W, height: NODE_H, rx: 6, ry: 6 });
    const symbol = s('text', { class: 'sym', x: 10, y: 19 });
    const head = s('text', { class: 'head', x: 27, y: 19, text: truncate(`${op.op_id} · ${kindShown(op)}`, HEAD_CHARS) });
    const stateLabel = s('text', { class: 'state-label', x: NODE_W - 10, y: 19, 'text-anchor': 'end' });
    const desc = s('text', { class: 'desc', x: 10, y: 36, text: truncate(op.description, DESC_CHARS) });
    const sub = s('text', { class: 'sub', x: 10, y: 51 });
    g.append(title, box, symbol, head, stateLabel, desc, sub);
    const parts = { title, symbol, stateLabel, sub, bar: null, toggle: null };
    if (!isLeaf(entry) && !st.graph) {
      sub.setAttribute('y', 48);
      const bar = s('g', { class: 'progress', transform: `translate(10,${NODE_H - 7})` });
      bar.appendChild(s('rect', { class: 'progress-track', width: NODE_W - 20, height: 3 }));
      parts.bar = {};
      for (const state of PROGRESS_ORDER) {
        parts.bar[state] = s('rect', { class: `progress-${state}`, height: 3, width: 0 });
        bar.appendChild(parts.bar[state]);
      }
      const toggleText = s('text', { y: 4, 'text-anchor': 'middle' });
      const toggle = s('g', {
        class: 'toggle', 'data-toggle': op.op_id, transform: `translate(${NODE_W},${NODE_H / 2})`,
      }, s('circle', { r: TOGGLE_R }), toggleText);
      g.append(bar, toggle);
      parts.toggle = toggleText;
    }
    entry.g = g;
    entry.parts = parts;
    entry.badge = null;
    paintOp(entry);
    return g;
  }

  const PROGRESS_ORDER = ['succeeded', 'failed', 'timeout', 'canceled', 'running', 'paused'];

  function progressText(entry) {
    const counts = entry.counts;
    const done = counts.succeeded + counts.failed + counts.canceled + counts.timeout;
    let text = `${done}/${entry.leaves} done`;
    if (counts.running + counts.paused) text += ` · ${counts.running + counts.paused} running`;
    if (counts.failed + counts.timeout) text += ` · ${counts.failed + counts.timeout} failed`;
    if (counts.canceled) text += ` · ${counts.canceled} canceled`;
    return { text, done };
  }

  function opClass(entry) {
    const op = entry.op;
    let cls = `op kind-${op.kind} state-${op.state}`;
    for (const when of entry.stops) cls += ` stop-${when}`;
    for (const when of entry.pauses) cls += ` pause-${when}`;
    if (entry.held) cls += ' held';
    if (entry.fired) cls += ` stop-fired stop-fired-${entry.fired}`;
    if (op.op_id === st.selectedOp) cls += ' selected';
    if (!isLeaf(entry) && !st.graph) cls += entry.open ? ' open' : ' collapsed';
    if (st.search.set.has(op.op_id)) cls += ' match';
    if (errorOf(op) && (op.state === 'failed' || op.state === 'timeout')) cls += ' has-error';
    return cls;
  }

  function paintOp(entry) {
    if (!entry.g) return;
    const op = entry.op;
    const parts = entry.parts;
    const stops = [...entry.stops].map((when) => `stop point ${when}`)
      .concat([...entry.pauses].map((when) => `pause point ${when}`))
      .concat(entry.fired ? [`stop point ${entry.fired} fired`] : [])
      .concat(entry.held ? ['held while the plan is paused'] : []).join(', ');
    const error = op.state === 'failed' || op.state === 'timeout' ? errorOf(op) : '';
    entry.g.setAttribute('class', opClass(entry));
    entry.g.setAttribute('aria-label', `op ${op.op_id}, ${kindShown(op)}, ${op.state}${stops ? ', ' + stops : ''}: ` +
      `${op.description || ''}${error ? ` — error: ${error}` : ''}`);
    parts.symbol.textContent = SYMBOL[op.state] || '•';
    parts.stateLabel.textContent = entry.held ? `${op.state} · held` : op.state;
    let sub;
    let progress = null;
    if (parts.bar) {
      progress = progressText(entry);
      sub = progress.text;
      parts.toggle.textContent = entry.open ? '−' : '+';
      entry.g.setAttribute('data-done', progress.done);
      entry.g.setAttribute('data-total', entry.leaves);
      let x = 0;
      const width = NODE_W - 20;
      for (const state of PROGRESS_ORDER) {
        const part = entry.leaves ? width * entry.counts[state] / entry.leaves : 0;
        parts.bar[state].setAttribute('x', x);
        parts.bar[state].setAttribute('width', part);
        x += part;
      }
    } else if (error) {
      sub = `✗ ${error}`;
    } else {
      sub = (st.graph && op.op_id === st.tree.root ? 'entry · ' : '') + (op.cap || '');
    }
    parts.sub.textContent = truncate(sub, error && !parts.bar ? ERROR_CHARS : SUB_CHARS);
    parts.sub.setAttribute('class', error && !parts.bar ? 'sub error-line' : 'sub');
    parts.title.textContent = `${op.op_id} · ${kindShown(op)} — ${op.state}${stops ? ' — ' + stops : ''}\n` +
      `${op.description || ''}${op.cap ? `\ncap: ${op.cap}` : ''}${'args' in op ? `\nargs: ${argsTip(entry)}` : ''}` +
      `${progress ? `\n${progress.text}` : ''}${error ? `\nerror: ${error}` : ''}`;
    paintStopBadge(entry);
  }

  // The stop badge: a bar on the side the stop point acts (left: on enter, right: on complete) and a
  // pill above the box; a click on the pill disarms the op's armed stop points. A fired one stays marked.
  // args cut by the server: {truncated: true, bytes, preview}; the whole op is one request away.
  function isCutArgs(args) {
    return Boolean(args) && typeof args === 'object' && args.truncated === true && typeof args.bytes === 'number' &&
      typeof args.preview === 'string';
  }

  // The args line of the node's tooltip, made once per args value (a tick repaints a thousand boxes).
  function argsTip(entry) {
    const args = entry.op.args;
    if (entry.argsTip && entry.argsTip.args === args) return entry.argsTip.text;
    const text = isCutArgs(args)
      ? `${truncate(args.preview, ARGS_TOOLTIP_CHARS)} (${args.bytes} bytes; "Full op" in the details shows them all)`
      : truncate(JSON.stringify(args), ARGS_TOOLTIP_CHARS);
    entry.argsTip = { args, text };
    return text;
  }

  function paintStopBadge(entry) {
    if (!entry.stops.size && !entry.pauses.size && !entry.fired) {
      if (entry.badge) entry.badge.group.setAttribute('display', 'none');
      return;
    }
    if (!entry.badge) {
      const enterBar = s('rect', { class: 'stop-bar stop-bar-enter', x: 0, y: 0, width: 6, height: NODE_H, rx: 2 });
      const completeBar = s('rect', {
        class: 'stop-bar stop-bar-complete', x: NODE_W - 6, y: 0, width: 6, height: NODE_H, rx: 2,
      });
      const title = s('title');
      const pill = s('rect', { class: 'stop-pill', y: -9, height: 15, rx: 7.5, ry: 7.5 });
      const text = s('text', { class: 'stop-text', y: 2 });
      const button = s('g', { class: 'stop-badge' }, title, pill, text);
      const group = s('g', { class: 'stop-marker' }, enterBar, completeBar, button);
      entry.g.appendChild(group);
      entry.badge = { group, enterBar, completeBar, button, title, pill, text };
    }
    const badge = entry.badge;
    const has = (when) => entry.stops.has(when) || entry.pauses.has(when) || entry.fired === when;
    const enter = has('on_enter');
    const complete = has('on_complete');
    const whens = (set) => (set.has('on_enter') && set.has('on_complete') ? 'on enter + complete'
      : set.has('on_enter') ? 'on enter' : 'on complete');
    const labels = [];
    if (entry.fired) labels.push(`■ stop ${WHEN_WORDS[entry.fired] || entry.fired} fired`);
    else if (entry.stops.size) labels.push(`■ stop ${whens(entry.stops)}`);
    if (entry.pauses.size) labels.push(`${labels.length ? '' : '‖ '}pause ${whens(entry.pauses)}`);
    const label = labels.join(' · ');
    const width = label.length * 6.1 + 14;
    const disarmable = !entry.fired && Boolean(st.tree && st.tree.running);
    badge.group.removeAttribute('display');
    const pauseOnly = !entry.fired && !entry.stops.size;
    badge.group.setAttribute('class', `stop-marker${entry.fired ? ' fired' : ''}${pauseOnly ? ' pause-only' : ''}`);
    badge.enterBar.setAttribute('display', enter ? 'inline' : 'none');
    badge.completeBar.setAttribute('display', complete ? 'inline' : 'none');
    badge.pill.setAttribute('x', NODE_W - width - 12);
    badge.pill.setAttribute('width', width);
    badge.text.setAttribute('x', NODE_W - width - 5);
    badge.text.textContent = label;
    badge.title.textContent = disarmable ? `${label.slice(2)}: click to disarm` : label.slice(2);
    if (disarmable) badge.button.setAttribute('data-disarm', entry.op.op_id);
    else badge.button.removeAttribute('data-disarm');
  }

  function toggleOp(opId, open) {
    const entry = st.ops.get(opId);
    if (!entry || isLeaf(entry) || st.graph) return;
    const next = open === undefined ? !entry.open : open;
    if (next === entry.open) return;
    st.userOpen.set(opId, next);
    relayout();
    for (const shown of st.visible) if (shown.g) st.dirty.add(shown.op.op_id);
    schedule();
  }

  // Opens every composite above an op (the operator's choice from then on) and scrolls to it.
  function reveal(opId) {
    const entry = st.ops.get(opId);
    if (!entry) return;
    let changed = false;
    ancestors(entry, (above) => {
      if (!above.open) changed = true;
      st.userOpen.set(above.op.op_id, true);
    });
    if (changed) {
      relayout();
      for (const shown of st.visible) if (shown.g) st.dirty.add(shown.op.op_id);
    }
    scrollToOp(entry);
    drawWindow();
    selectOp(opId);
  }

  // ---------------------------------------------------------------- step graphs
  //
  // Steps are nodes in columns by their distance from the entry step; each terminal a step leads to is
  // a node of its own in the last column. Each (from, to) pair is one edge carrying one label per
  // outcome; edges that go back (cycles) or stay in a column arc below the nodes.

  function layoutGraph(tree) {
    const transitions = tree.transitions;
    const steps = tree.ops.map((op) => op.op_id);
    const isStep = new Set(steps);
    const level = new Map();
    const queue = [];
    if (isStep.has(tree.root)) {
      level.set(tree.root, 0);
      queue.push(tree.root);
    }
    while (queue.length) {
      const step = queue.shift();
      for (const next of Object.values(transitions[step] || {})) {
        if (isStep.has(next) && !level.has(next)) {
          level.set(next, level.get(step) + 1);
          queue.push(next);
        }
      }
    }
    let deepest = 0;
    for (const value of level.values()) deepest = Math.max(deepest, value);
    for (const step of steps) if (!level.has(step)) level.set(step, deepest + 1);  // unreachable steps
    for (const value of level.values()) deepest = Math.max(deepest, value);
    const terminals = [];
    for (const step of steps) {
      for (const next of Object.values(transitions[step] || {})) {
        if (!isStep.has(next) && !terminals.includes(next)) terminals.push(next);
      }
    }
    const rows = new Map();
    const place = (id, column) => {
      const row = rows.get(column) || 0;
      rows.set(column, row + 1);
      return { x: PAD + column * G_COL_W, y: PAD + row * G_ROW_H };
    };
    const nodes = new Map();
    for (const step of steps) {
      const where = place(step, level.get(step));
      const entry = st.ops.get(step);
      entry.x = where.x;
      entry.y = where.y;
      entry.shown = true;
      nodes.set(step, { x: where.x, y: where.y, w: NODE_W, h: NODE_H, column: level.get(step) });
    }
    const terminalColumn = terminals.length ? deepest + 1 : deepest;
    for (const name of terminals) {
      const where = place(name, terminalColumn);
      nodes.set(`\u0000${name}`, {
        x: where.x, y: where.y + (NODE_H - TERM_H) / 2, w: TERM_W, h: TERM_H, column: terminalColumn,
      });
    }
    let lowest = 0;
    for (const node of nodes.values()) lowest = Math.max(lowest, node.y + node.h);
    st.visible = steps.map((step) => st.ops.get(step));

    const groups = new Map();
    for (const step of steps) {
      for (const [outcome, next] of Object.entries(transitions[step] || {})) {
        const key = `${step}\u0000${next}`;
        if (!groups.has(key)) groups.set(key, { from: step, to: next, outcomes: [] });
        groups.get(key).outcomes.push(outcome);
      }
    }
    const defs = s('defs', null,
      s('marker', {
        id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
      }, s('path', { class: 'arrow-head', d: 'M0 0L10 5L0 10z' })),
      s('marker', {
        id: 'arrow-taken', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
      }, s('path', { class: 'arrow-head taken', d: 'M0 0L10 5L0 10z' })));
    const edgeGroup = s('g', { class: 'graph-edges' });
    const labelGroup = s('g', { class: 'graph-labels' });
    const labels = new Map();
    const edges = [];
    // Edges to the next column bend straight there; longer ones arc over the nodes (shorter spans
    // lower), edges back or across a column arc under them: cycles show as the arcs below.
    const nodeOf = (id) => nodes.get(isStep.has(id) ? id : `\u0000${id}`);
    const spanOf = (group) => nodeOf(group.to).column - nodeOf(group.from).column;
    const ordered = [...groups.values()].sort((a, b) => Math.abs(spanOf(a)) - Math.abs(spanOf(b)));
    const overs = ordered.filter((group) => group.from !== group.to && spanOf(group) > 1).length;
    const selfLoops = ordered.some((group) => group.from === group.to);
    const topRoom = overs ? 30 + 20 * overs : (selfLoops ? 46 : 0);
    for (const node of nodes.values()) node.y += topRoom;
    for (const entry of st.visible) entry.y += topRoom;
    let over = 0;
    let under = 0;
    let deepestArc = lowest + topRoom;
    for (const group of ordered) {
      const from = nodeOf(group.from);
      const to = nodeOf(group.to);
      const span = spanOf(group);
      let d;
      let lx;
      let ly;
      if (group.from === group.to) {  // a self-loop above the node's right half
        const x = from.x + from.w * 0.62;
        d = `M${x} ${from.y}C${x - 10} ${from.y - 44} ${x + 60} ${from.y - 44} ${x + 50} ${from.y}`;
        lx = x + 58;
        ly = from.y - 30;
      } else if (span === 1) {
        const x1 = from.x + from.w;
        const y1 = from.y + from.h / 2;
        const x2 = to.x;
        const y2 = to.y + to.h / 2;
        const bend = (x2 - x1) / 2;
        d = `M${x1} ${y1}C${x1 + bend} ${y1} ${x2 - bend} ${y2} ${x2} ${y2}`;
        lx = (x1 + x2) / 2 - 30;
        ly = (y1 + y2) / 2 - 5 - (group.outcomes.length - 1) * 7;
      } else if (span > 1) {
        over += 1;
        const x1 = from.x + from.w * 0.7;
        const x2 = to.x + to.w * 0.3;
        const top = Math.min(from.y, to.y) - 14 - 20 * over;
        d = `M${x1} ${from.y}C${x1} ${top} ${x2} ${top} ${x2} ${to.y}`;
        lx = (x1 + x2) / 2 - 30;
        ly = from.y + 0.75 * (top - from.y) - 4 - (group.outcomes.length - 1) * 14;
      } else {
        under += 1;
        const x1 = from.x + from.w * 0.4;
        const x2 = to.x + to.w * 0.6;
        const y1 = from.y + from.h;
        const y2 = to.y + to.h;
        const bottom = Math.max(y1, y2) + 26 + 22 * under;
        deepestArc = Math.max(deepestArc, bottom);
        d = `M${x1} ${y1}C${x1} ${bottom} ${x2} ${bottom} ${x2} ${y2}`;
        lx = (x1 + x2) / 2 - 20;
        ly = Math.max(y1, y2) + 0.75 * (bottom - Math.max(y1, y2)) + 13;
        deepestArc = Math.max(deepestArc, ly + group.outcomes.length * 14);
      }
      const terminal = !isStep.has(group.to);
      const path = s('path', {
        class: `gedge${terminal ? ` to-terminal terminal-${group.to}` : ''}${group.to === group.from ? ' self' : ''}`,
        d, 'marker-end': 'url(#arrow)', 'data-from': group.from, 'data-to': group.to,
      });
      edgeGroup.appendChild(path);
      const edge = { path, outcomes: group.outcomes, from: group.from, to: group.to };
      edges.push(edge);
      group.outcomes.forEach((outcome, index) => {
        const text = s('text', {
          class: `transition${terminal ? ` terminal terminal-${group.to}` : ''}`, x: lx, y: ly + index * 14,
          'data-from': group.from, 'data-outcome': outcome, 'data-to': group.to,
        }, s('tspan', { class: 'outcome', text: outcome }));
        labels.set(`${group.from}\u0000${outcome}`, { el: text, edge });
        labelGroup.appendChild(text);
      });
    }
    const terminalGroup = s('g', { class: 'terminals' });
    const terminalEls = new Map();
    for (const name of terminals) {
      const node = nodes.get(`\u0000${name}`);
      const g = s('g', {
        class: `terminal-node terminal-${name}`, 'data-terminal': name, transform: `translate(${node.x},${node.y})`,
      },
      s('title', { text: `terminal: ${name}` }),
      s('rect', { class: 'terminal-box', width: TERM_W, height: TERM_H, rx: TERM_H / 2, ry: TERM_H / 2 }),
      s('text', { class: 'terminal-name', x: TERM_W / 2, y: TERM_H / 2 + 4, 'text-anchor': 'middle', text: name }));
      terminalEls.set(name, g);
      terminalGroup.appendChild(g);
    }
    st.edgeLayer.append(defs, edgeGroup, terminalGroup, labelGroup);
    st.graph = { transitions, labels, edges, terminals: terminalEls, trace: [], seen: new Set() };
    let widest = 0;
    for (const node of nodes.values()) widest = Math.max(widest, node.x + node.w);
    st.size = { width: widest + PAD + 40, height: deepestArc + PAD + 16 };
  }

  // The taken transitions come from the run's trace (its outcomes, in the tree view live and finished),
  // never from where edges lead; a finished run's path ends with its terminal.
  function loadTrace(tree) {
    const graph = st.graph;
    if (!graph) return;
    graph.trace = [];
    graph.seen = new Set();
    for (const entry of tree.trace || []) addTrace(entry);
    const path = tree.path || [];
    graph.terminal = !tree.running && graph.terminals.has(path[path.length - 1]) ? path[path.length - 1] : null;
    paintTaken();
  }

  function addTrace(entry) {
    const graph = st.graph;
    const key = `${entry.step}\u0000${entry.outcome}\u0000${entry.time || ''}`;
    if (entry.time && graph.seen.has(key)) return;
    graph.seen.add(key);
    graph.trace.push({ step: entry.step, outcome: entry.outcome, next: entry.next });
  }

  function paintTaken() {
    const graph = st.graph;
    if (!graph) return;
    const taken = new Map();
    for (const entry of graph.trace) {
      const key = `${entry.step}\u0000${entry.outcome}`;
      taken.set(key, (taken.get(key) || 0) + 1);
    }
    const last = graph.trace[graph.trace.length - 1];
    for (const edge of graph.edges) {
      const times = edge.outcomes.reduce((sum, outcome) => sum + (taken.get(`${edge.from}\u0000${outcome}`) || 0), 0);
      edge.path.classList.toggle('taken', times > 0);
      edge.path.classList.toggle('last', Boolean(last && last.step === edge.from && edge.outcomes.includes(last.outcome)));
      edge.path.setAttribute('marker-end', times > 0 ? 'url(#arrow-taken)' : 'url(#arrow)');
    }
    for (const [key, label] of graph.labels) {
      const times = taken.get(key) || 0;
      label.el.classList.toggle('taken', times > 0);
      const outcome = label.el.firstChild;
      outcome.textContent = times > 1 ? `${label.el.dataset.outcome} ×${times}` : label.el.dataset.outcome;
    }
    const reached = last && graph.terminals.has(last.next) ? last.next : graph.terminal;
    for (const [name, g] of graph.terminals) g.classList.toggle('reached', name === reached);
  }

  // ---------------------------------------------------------------- view: zoom, minimap, search, follow

  function applyZoom() {
    const zoom = st.zoom;
    const svg = $('#tree');
    svg.setAttribute('viewBox', `0 0 ${st.size.width} ${st.size.height}`);
    svg.setAttribute('width', Math.ceil(st.size.width * zoom));
    svg.setAttribute('height', Math.ceil(st.size.height * zoom));
    $('#zoom-level').textContent = `${Math.round(zoom * 100)}%`;
    scheduleWindow();
  }

  function zoomBy(step) {
    const scroller = $('#tree-scroll');
    const before = st.zoom;
    // The next of ZOOMS up or down from where it is (a fitted zoom may lie between two of them).
    const next = step === 0 ? 1
      : (step > 0 ? ZOOMS.find((zoom) => zoom > before) : [...ZOOMS].reverse().find((zoom) => zoom < before));
    if (next === undefined || next === before) return;
    const cx = (scroller.scrollLeft + scroller.clientWidth / 2) / before;
    const cy = (scroller.scrollTop + scroller.clientHeight / 2) / before;
    st.zoom = next;
    applyZoom();
    const after = next;
    scroller.scrollTo(cx * after - scroller.clientWidth / 2, cy * after - scroller.clientHeight / 2);
  }

  function stateColours() {
    if (st.colours) return st.colours;
    st.colours = {};
    for (const chip of document.querySelectorAll('.legend .chip')) {
      const state = [...chip.classList].find((cls) => cls.startsWith('state-'));
      if (state) st.colours[state.slice(6)] = getComputedStyle(chip).getPropertyValue('--node-stroke').trim();
    }
    return st.colours;
  }

  // The whole laid-out tree, one bar per op in its state's colour, and the viewport as a frame.
  function drawMinimap() {
    st.minimapDirty = false;
    const canvas = $('#minimap');
    const width = canvas.clientWidth;
    const height = canvas.clientHeight;
    if (!width || !height) return;
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width;
      canvas.height = height;
    }
    const context = canvas.getContext('2d');
    context.clearRect(0, 0, width, height);
    if (!st.tree || !st.size.width) return;
    const scale = minimapScale();
    const colours = stateColours();
    const w = Math.max(2, NODE_W * scale.x);
    const h = Math.max(1, NODE_H * scale.y);
    for (const entry of st.visible) {
      context.fillStyle = colours[entry.op.state] || '#a3abb8';
      context.fillRect(entry.x * scale.x, entry.y * scale.y, w, h);
    }
    const scroller = $('#tree-scroll');
    const zoom = st.zoom;
    context.strokeStyle = '#1f5fbf';
    context.lineWidth = 2;
    context.strokeRect(scroller.scrollLeft / zoom * scale.x + 1, scroller.scrollTop / zoom * scale.y + 1,
      Math.max(4, scroller.clientWidth / zoom * scale.x - 2), Math.max(4, scroller.clientHeight / zoom * scale.y - 2));
  }

  function minimapScale() {
    const canvas = $('#minimap');
    const x = canvas.clientWidth / st.size.width;
    return { x, y: Math.min(canvas.clientHeight / st.size.height, x * 1.5) };
  }

  function minimapScroll(event) {
    if (!st.tree || !st.size.width) return;
    const canvas = $('#minimap');
    const box = canvas.getBoundingClientRect();
    const scale = minimapScale();
    const zoom = st.zoom;
    const scroller = $('#tree-scroll');
    const x = (event.clientX - box.left) / scale.x * zoom;
    const y = (event.clientY - box.top) / scale.y * zoom;
    scroller.scrollTo(x - scroller.clientWidth / 2, y - scroller.clientHeight / 2);
  }

  function applySearch() {
    const query = $('#search').value.trim().toLowerCase();
    const matches = [];
    if (query) {
      for (const entry of st.ops.values()) {
        const op = entry.op;
        if (String(op.op_id).toLowerCase() === query) matches.unshift(op.op_id);
        else if (`${op.description || ''}\n${op.cap || ''}\n${op.kind}`.toLowerCase().includes(query)) matches.push(op.op_id);
      }
    }
    const before = st.search.set;
    st.search = { query, matches, set: new Set(matches), index: -1 };
    for (const id of new Set([...before, ...matches])) {
      const entry = st.ops.get(id);
      if (entry && entry.g) st.dirty.add(id);
    }
    $('#search-count').textContent = query ? `${matches.length} match${matches.length === 1 ? '' : 'es'}` : '';
    schedule();
  }

  function searchNext() {
    const search = st.search;
    if (!search.matches.length) {
      if (search.query) showMessage('info', `no op matches “${search.query}”`);
      return;
    }
    search.index = (search.index + 1) % search.matches.length;
    $('#search-count').textContent = `${search.index + 1} of ${search.matches.length}`;
    reveal(search.matches[search.index]);
  }

  function inView(entry) {
    const scroller = $('#tree-scroll');
    const zoom = st.zoom;
    const x = entry.x * zoom - scroller.scrollLeft;
    const y = entry.y * zoom - scroller.scrollTop;
    return x >= 0 && y >= 0 && x + NODE_W * zoom <= scroller.clientWidth && y + NODE_H * zoom <= scroller.clientHeight;
  }

  // "Follow running": when no running op is in view, the first one (in tree order) is scrolled to.
  function followRunning() {
    if (!$('#follow-running').checked || !st.tree) return;
    let first = null;
    for (const entry of st.visible) {
      if ((entry.op.state !== 'running' && entry.op.state !== 'paused') || (!isLeaf(entry) && entry.open)) continue;
      if (inView(entry)) return;
      if (first === null) first = entry;
    }
    if (first) scrollToOp(first);
  }

  function gotoRunning() {
    let target = null;
    for (const entry of st.ops.values()) {
      if (entry.op.state === 'running' && isLeaf(entry)) {
        target = entry;
        break;
      }
    }
    if (!target) {
      showMessage('info', 'no op of this plan is running');
      return;
    }
    reveal(target.op.op_id);
  }

  function scrollToOp(entry) {
    const scroller = $('#tree-scroll');
    const zoom = st.zoom;
    const x = (entry.x + NODE_W / 2) * zoom;
    const y = (entry.y + NODE_H / 2) * zoom;
    scroller.scrollTo(x - scroller.clientWidth / 2, y - scroller.clientHeight / 2);
    scheduleWindow();
  }

  // ---------------------------------------------------------------- live updates

  function applyNodeEvent(event, replayed) {
    if (event.event === 'paused' || event.event === 'resumed') {
      applyPause(event);
      return;
    }
    if (event.event === 'stop_point') {
      applyStopPoint(event);
      return;
    }
    if (event.event === 'step_transition') {
      if (st.graph) {
        addTrace(event);
        paintTaken();
      }
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
    if (FINAL_STATES.has(event.state) && st.tree && st.tree.paused) rereadPlan();
    if (FINAL_STATES.has(event.state)) op.ended_at = event.time;
    if (event.state === 'running' && FINAL_STATES.has(entry.op.state)) {  // a step run again
      op.started_at = event.time;
      op.ended_at = null;
      op.result = null;
    }
    const before = entry.op.state;
    entry.op = op;
    if (op.state !== 'pending') entry.held = false;
    if (before !== op.state && isLeaf(entry)) {
      ancestors(entry, (above) => {
        if (before in above.counts) above.counts[before] -= 1;
        if (op.state in above.counts) above.counts[op.state] += 1;
        if (above.g) st.dirty.add(above.op.op_id);
        if (!st.graph && above.open !== isOpen(above)) st.layoutDirty = true;
      });
    }
    st.statesChanged = true;
    st.minimapDirty = true;
    markDirty(op.op_id);
  }

  // A stop point armed, disarmed or fired through any door (the page, HTTP, MCP, ROS, a builtin, the API).
  function applyStopPoint(event) {
    const entry = st.ops.get(event.op_id);
    if (!entry) return;
    if (event.action === 'pause') {  // a pause point: it fires once, and the plan pauses there
      if (event.state === 'armed' && st.tree && st.tree.running) entry.pauses.add(event.when);
      else entry.pauses.delete(event.when);
      markDirty(event.op_id);
      return;
    }
    if (event.state === 'armed' && st.tree && st.tree.running) entry.stops.add(event.when);
    else if (event.state === 'disarmed') entry.stops.delete(event.when);
    else if (event.state === 'fired') {  // the plan is being cancelled: that stop point is spent
      entry.stops.delete(event.when);
      entry.fired = event.when;
    }
    markDirty(event.op_id);
  }

  // The plan paused or resumed, through any door.
  function applyPause(event) {
    const paused = event.event === 'paused';
    st.tree.paused = paused;
    if (paused) st.tree.stepping = false;  // a pause ends a pending step
    if (!paused) {
      for (const entry of st.ops.values()) {
        if (!entry.held) continue;
        entry.held = false;
        markDirty(entry.op.op_id);
      }
    }
    rereadPlan();  // which ops it holds, whether a step is pending (a resume may be a step)
    renderStatus();
    st.detailsDirty = true;
    schedule();
  }

  // Which ops a paused plan holds, and whether a step is pending, are in its tree view only (no event says
  // them): the tree is read again when the plan pauses or resumes, when one of its ops ends while paused (the
  // next one is then held), and after this page paused, resumed or stepped it.
  function rereadPlan() {
    if (st.rereadTimer !== null) return;
    st.rereadTimer = setTimeout(() => {
      st.rereadTimer = null;
      if (st.tree && st.tree.running) reloadSelected();
    }, 50);
  }

  function onEvent(event) {
    if (event.event === 'replay_clock' || event.event === 'replay_seek') {
      onReplayClock(event);
      return;
    }
    logEvent(event);
    switch (event.event) {
      case 'paused':
      case 'resumed':
        refreshLists();
        if (event.plan_id !== st.selectedPlan) return;
        if (st.buffer !== null && st.bufferPlan === event.plan_id) st.buffer.push(event);
        else if (st.renderedPlan === event.plan_id && st.tree) applyPause(event);
        return;
      case 'stop_point':
        refreshLists();  // the list counts each plan's armed stop points
      // falls through
      case 'node_state':
      case 'step_transition':
        if (event.plan_id !== st.selectedPlan) return;
        if (st.buffer !== null && st.bufferPlan === event.plan_id) st.buffer.push(event);
        else if (st.renderedPlan === event.plan_id) applyNodeEvent(event);
        return;
      case 'plan_started':
        refreshLists();
        // The plan shown could not be read before it started (a replay moved back before its start).
        if (event.plan_id === st.selectedPlan && st.loadFailed) reloadSelected();
        return;
      case 'plan_complete':
        if (event.plan_id === st.selectedPlan && st.tree) {
          st.tree.running = false;
          st.tree.paused = false;
          st.tree.outcome = event.outcome;
          st.tree.cancelled = event.cancelled;
          st.tree.failed_op = event.failed_op || null;
          for (const entry of st.ops.values()) {  // a plan that ended has no stop point armed, holds no op
            if (!entry.stops.size && !entry.pauses.size && !entry.held) continue;
            entry.stops.clear();
            entry.pauses.clear();
            entry.held = false;
            markDirty(entry.op.op_id);
          }
          if (st.graph && event.terminal && st.graph.terminals.has(event.terminal)) {
            st.graph.terminal = event.terminal;
            paintTaken();
          }
          renderStatus();
          st.detailsDirty = true;
          schedule();
        }
        // The lists and the final record (results, times) are read once the frame that shows the
        // last states is out: a plan that ends a thousand ops at once is shown ended first.
        requestAnimationFrame(() => setTimeout(() => {
          refreshLists();
          if (event.plan_id === st.selectedPlan) reloadSelected();
        }, 0));
        return;
      case 'dropped':
        st.missed += event.count;
        if (!st.droppedNote || !st.droppedNote.isConnected) st.droppedNote = showMessage('warn', '');
        st.droppedNote.querySelector('.msg-text').textContent =
          `the console fell behind and missed ${st.missed} event(s); the view was read again`;
        refreshLists();
        reloadSelected();
        if (st.replay) readReplayClock();
        return;
      default:
    }
  }

  function connectEvents() {
    // EventSource cannot send headers: the token, when there is one, goes in the query.
    let url = robotPath('/api/events');
    if (st.token) url = withQuery(url, 'token', st.token);
    const source = new EventSource(url);
    st.events = source;
    source.addEventListener('open', () => {
      st.connection = 'open';
      renderConnection();
      // First connection or a reconnect: whatever happened while not listening is read again
      // (a tree read before the stream was open may have missed events, so it is read again too).
      loadRecentEvents();
      refreshLists();
      reloadSelected();
    });
    source.addEventListener('error', () => {
      if (st.connection === 'closed') return;  // the server said it closes: nothing to reconnect to
      // A stream that broke without the server's word (it crashed, the network failed): the browser retries.
      st.connection = source.readyState === EventSource.CLOSED ? 'down' : 'reconnecting';
      renderConnection();
    });
    source.addEventListener('message', (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch (err) {
        showMessage('error', `unreadable event from the server: ${err.message}`);
        return;
      }
      if (event.event === 'server_closing') serverClosed(source, event.message);
      else onEvent(event);
    });
  }

  // The server closes on purpose (its command ended, Ctrl-C): the page keeps what it shows, says so, and
  // neither reconnects nor offers controls that would reach nobody.
  function serverClosed(source, message) {
    source.close();
    st.connection = 'closed';
    st.closingMessage = message || 'the app stopped serving';
    renderConnection();
    showMessage('warn', `The server closed (${st.closingMessage}): the page shows the last state it sent; reload ` +
      'it once the app serves again.');
    document.body.classList.add('server-closed');
    for (const control of document.querySelectorAll('.topbar .btn, .replay-bar .btn, .replay-bar input, .replay-bar select, ' +
      '.submit .btn')) control.disabled = true;
    renderDetails();
  }

  // The badge at the top: whether the page follows a live app, a replay (which run, where), or one that closed.
  function renderConnection() {
    const badge = $('#connection');
    const replay = st.replay;
    const [text, cls, title] = {
      connecting: ['○ connecting…', 'conn-connecting', 'opening the event stream'],
      open: replay
        ? [`● replay · ${replayWhere()}`, 'conn-replay', 'a recorded run, played back by bt-exec replay']
        : ['● live', 'conn-live', 'following the app live'],
      reconnecting: ['◌ reconnecting…', 'conn-connecting', 'the event stream broke; the browser opens it again'],
      down: ['✗ disconnected', 'conn-down', 'the event stream was refused; reload the page'],
      closed: [`■ ${st.closingMessage}`, 'conn-closed', `the server closed on purpose: ${st.closingMessage}`],
    }[st.connection];
    badge.textContent = text;
    badge.className = `connection ${cls}`;
    badge.title = title;
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
      case 'stop_point':
        return `${event.action === 'pause' ? 'pause' : 'stop'} point ${event.state || ''} at op ${event.op_id} ` +
          `${event.when || ''}` + (event.source ? ` (${event.source})` : '');
      case 'pause_point':
        return `pause point reached at op ${event.op_id} ${event.when || ''}`;
      case 'paused':
        return `‖ paused${event.op_id !== undefined ? ` at op ${event.op_id} ${event.when || ''}` : ''}` +
          (event.source ? ` (${event.source})` : '');
      case 'resumed':
        return `▶ resumed${event.source ? ` (${event.source})` : ''}`;
      case 'dropped':
        return `${event.count} event(s) dropped: the view was reloaded`;
      default:
        return JSON.stringify(event);
    }
  }

  // A few entries a frame, oldest first (each batch goes on top): a burst of a thousand events never
  // holds up the frame that draws the tree.
  function flushLog() {
    if (!st.logQueue.length) return;
    const list = $('#event-log');
    const fragment = document.createDocumentFragment();
    const batch = st.logQueue.splice(0, LOG_PER_FRAME);
    for (let i = batch.length - 1; i >= 0; i -= 1) {
      const event = batch[i];
      const kind = event.event || 'event';
      const state = event.state || event.outcome || '';
      fragment.appendChild(h('li', { class: `log-entry log-${kind}${state ? ` log-state-${state}` : ''}` },
        h('time', { class: 'log-time', text: clock(event.time) }),
        h('span', { class: 'log-plan', text: event.plan_id ? `#${event.plan_id}` : '' }),
        h('span', { class: 'log-kind', text: kind.replace('_', ' ') }),
        h('span', { class: 'log-text', text: describeEvent(event) })));
    }
    list.insertBefore(fragment, list.firstChild);
    while (list.childElementCount > LOG_MAX) list.lastElementChild.remove();
    if (st.logQueue.length) schedule();
  }

  // ---------------------------------------------------------------- details panel

  function fact(list, name, value, cls) {
    if (value === null || value === undefined || value === '') return;
    list.append(h('dt', { text: name }), h('dd', { class: cls || null, text: String(value) }));
  }

  function renderDetails() {
    const tree = st.tree;
    // A closed server takes no control: the page only shows what it last sent.
    const running = Boolean(tree && tree.running) && st.connection !== 'closed';
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
      const failure = state === 'failed' ? tree.failed_op : null;
      if (failure) fact(planFacts, 'Failed at', failureText(failure), 'error-text');
      if (tree.duration_s) fact(planFacts, 'Duration', duration(tree.duration_s));
      if (tree.transitions) fact(planFacts, 'Path', (tree.path || []).join(' → ') || '(not started)');
      world.hidden = !tree.state;
      if (tree.state) $('#world-state-json').textContent = pretty(tree.state);
    } else {
      world.hidden = true;
    }
    document.querySelector('[data-action="cancel-plan"]').disabled = !running;
    // As the plan's view says (paused, stepping: a step pending): Resume acts on a paused plan and on one
    // with a step pending (it goes on running, no pause behind the next op).
    const paused = running && Boolean(tree.paused);
    const stepping = running && Boolean(tree.stepping);
    document.querySelector('[data-action="pause-plan"]').disabled = !running || paused;
    document.querySelector('[data-action="resume-plan"]').disabled = !(paused || stepping);
    document.querySelector('[data-action="step-plan"]').disabled = !running;

    const entry = st.selectedOp === null ? null : st.ops.get(st.selectedOp);
    $('#op-title').textContent = entry ? entry.op.op_id : '—';
    $('#op-hint').hidden = Boolean(entry);
    for (const when of ['on_enter', 'on_complete']) {
      const button = document.querySelector(`[data-action="stop-${when}"]`);
      button.disabled = !(entry && running);
      button.classList.toggle('armed', Boolean(entry && entry.stops.has(when)));
      button.setAttribute('aria-pressed', entry && entry.stops.has(when) ? 'true' : 'false');
      const pause = document.querySelector(`[data-action="pause-${when}"]`);
      pause.disabled = !(entry && running);
      pause.classList.toggle('armed-pause', Boolean(entry && entry.pauses.has(when)));
      pause.setAttribute('aria-pressed', entry && entry.pauses.has(when) ? 'true' : 'false');
    }
    const opFacts = $('#op-facts');
    const blocks = $('#op-blocks');
    clear(opFacts);
    clear(blocks);
    if (!entry) return;
    const op = entry.op;
    fact(opFacts, 'Id', op.op_id);
    fact(opFacts, 'Kind', kindShown(op));
    fact(opFacts, 'Cap', op.cap);
    fact(opFacts, 'State', `${SYMBOL[op.state] || '•'} ${op.state}`, `state-text-${op.state}`);
    fact(opFacts, 'Stop point', entry.fired ? `${entry.fired} (fired)` : [...entry.stops].join(', ') || 'none');
    if (entry.pauses.size) fact(opFacts, 'Pause point', [...entry.pauses].join(', '));
    if (entry.held) fact(opFacts, 'Held', 'waits to start until the plan resumes', 'outcome-paused');
    if (op.children && op.children.length) fact(opFacts, 'Children', op.children.join(', '));
    fact(opFacts, 'Started', clock(op.started_at));
    if (op.ended_at) fact(opFacts, 'Ended', `${clock(op.ended_at)}${op.started_at ? ` (${duration(op.ended_at - op.started_at)})` : ''}`);
    if (tree && tree.transitions && tree.transitions[op.op_id]) {
      fact(opFacts, 'Transitions', Object.entries(tree.transitions[op.op_id]).map(([k, v]) => `${k} → ${v}`).join(', '));
    }
    blocks.append(h('h4', { text: 'Description' }), h('p', { class: 'full-desc', text: op.description || '(none)' }));
    if ('args' in op) blocks.append(...argsBlock(entry));
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

  // The op's args as pretty JSON; args the server cut show their start and a button that reads the whole op.
  function argsBlock(entry) {
    const args = entry.fullArgs !== undefined ? entry.fullArgs : entry.op.args;
    const heading = h('h4', { text: 'Args' });
    if (!isCutArgs(args)) {
      const note = entry.fullArgs !== undefined ? h('span', { class: 'muted args-note', text: ' (whole)' }) : null;
      if (note) heading.appendChild(note);
      return [heading, h('pre', { class: 'args', text: JSON.stringify(args, null, 2) })];
    }
    const note = h('p', { class: 'args-cut' },
      `cut: ${args.bytes.toLocaleString('en')} bytes in all `,
      h('button', {
        type: 'button', class: 'btn small', 'data-action': 'full-op', 'data-op-id': entry.op.op_id, text: 'Full op',
      }));
    return [heading, h('pre', { class: 'args cut', text: args.preview }), note];
  }

  async function loadFullOp(opId) {
    const planId = st.selectedPlan;
    if (planId === null) return;
    let answer;
    try {
      answer = await api('GET', planPath(planId, `ops/${encodeURIComponent(opId)}`));
    } catch (err) {
      report(err);
      return;
    }
    const entry = planId === st.renderedPlan ? st.ops.get(opId) : null;
    if (!entry || !answer.op || !('args' in answer.op)) return;
    entry.fullArgs = answer.op.args;
    if (opId === st.selectedOp) renderDetails();
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

  function toggleStop(when, action) {
    const entry = st.selectedOp === null ? null : st.ops.get(st.selectedOp);
    const armed = entry && (action === 'pause' ? entry.pauses : entry.stops).has(when);
    if (armed) disarmAt(st.selectedOp, [when]);
    else stopAt(when, action);
  }

  async function stopAt(when, action) {
    const planId = st.selectedPlan;
    const opId = st.selectedOp;
    if (planId === null || opId === null) return;
    try {
      const answer = await api('POST', planPath(planId, 'stop_at'), { op_id: opId, when, action: action || 'cancel' });
      showMessage(answer.message && answer.message.includes('will not fire') ? 'warn' : 'info', answer.message);
      const entry = st.ops.get(opId);
      if (answer.armed && entry && planId === st.selectedPlan) {
        (action === 'pause' ? entry.pauses : entry.stops).add(when);
        markDirty(opId);
        st.detailsDirty = true;
        schedule();
      }
      refreshLists();
    } catch (err) {
      report(err);
    }
  }

  // A click on a stop badge disarms every stop point armed at that op; on a pressed stop button, its own.
  async function disarmAt(opId, whens) {
    const planId = st.selectedPlan;
    const entry = st.ops.get(opId);
    if (planId === null || !entry) return;
    for (const when of whens || [...new Set([...entry.stops, ...entry.pauses])]) {
      try {
        const answer = await api('POST', planPath(planId, 'disarm'), { op_id: opId, when });
        showMessage(answer.disarmed ? 'info' : 'warn', answer.message);
        if (answer.disarmed && planId === st.selectedPlan && st.ops.get(opId) === entry) {
          entry.stops.delete(when);
          entry.pauses.delete(when);
          markDirty(opId);
        }
      } catch (err) {
        report(err);
      }
    }
    refreshLists();
  }

  // Pause, resume or step the shown plan; what it did arrives as events (paused, resumed, node_state).
  async function pauseControl(operation) {
    const planId = st.selectedPlan;
    if (planId === null) return;
    try {
      const answer = await api('POST', planPath(planId, operation), {});
      const acted = answer.paused !== false && answer.resumed !== false;
      showMessage(acted ? 'info' : 'warn', answer.message);
    } catch (err) {
      report(err);
    }
    if (planId === st.selectedPlan) rereadPlan();  // a step or resume on a running plan sends no event
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

  // ---------------------------------------------------------------- replay
  //
  // Served by `bt-exec replay --web`, the page follows a recorded run: the server plays it and sends a
  // replay_clock event after each batch (the slider follows it), a replay_seek event after a seek (the
  // page reads the plans and the recent events again). The journal stays on the server.

  function enterReplayMode() {
    if (st.replay) return;
    st.replay = { position: 0, count: 0, playing: false, speed: 1, time: null, first_time: null, last_time: null };
    document.body.classList.add('replay-mode');
    $('#replay-bar').hidden = false;
    readReplayClock();
  }

  async function readReplayClock() {
    try {
      showReplayClock(await api('GET', '/api/replay'));
    } catch (err) {
      report(err);
    }
  }

  function onReplayClock(event) {
    enterReplayMode();
    showReplayClock(event);
    if (event.event !== 'replay_seek') return;
    clear($('#event-log'));
    st.logQueue = [];
    st.lastLogSeq = 0;
    st.followedUpTo = 0;
    loadRecentEvents();
    refreshLists();
    reloadSelected();
  }

  function showReplayClock(clockState) {
    // An answer the event stream overtook (a play's, read at max speed after the run ended) is older: kept out.
    if (st.replay.revision !== undefined && clockState.revision < st.replay.revision) return;
    Object.assign(st.replay, clockState);
    const replay = st.replay;
    const slider = $('#replay-slider');
    slider.max = String(replay.count);
    if (!st.replayDragging) slider.value = String(replay.position);
    const toggle = $('#replay-toggle');
    toggle.textContent = replay.playing ? '‖ Pause' : '▶ Play';
    toggle.setAttribute('aria-pressed', replay.playing ? 'true' : 'false');
    const speed = $('#replay-speed');
    if (document.activeElement !== speed && [...speed.options].some((o) => Number(o.value) === replay.speed)) {
      speed.value = [...speed.options].find((o) => Number(o.value) === replay.speed).value;
    }
    renderReplayPosition(st.replayDragging ? Number(slider.value) : replay.position);
    if (st.connection !== 'closed') {
      $('[data-action="replay-back"]').disabled = replay.position <= 0;
      $('[data-action="replay-forward"]').disabled = replay.position >= replay.count;
    }
    renderConnection();
  }

  // Where the replay is, in the run's events (0: before the first, the plans not started).
  function replayWhere() {
    const replay = st.replay;
    if (replay.position === 0) return `start (${replay.count} events)`;
    return `event ${replay.position} / ${replay.count}${replay.ended ? ' (end)' : ''}`;
  }

  function renderReplayPosition(position) {
    const replay = st.replay;
    const at = replay.time !== null && replay.first_time !== null ? replay.time - replay.first_time : null;
    const span = replay.last_time !== null && replay.first_time !== null ? replay.last_time - replay.first_time : null;
    let text;
    if (position === 0) {  // the start: no event played, no plan started
      text = `before event 1 / ${replay.count}`;
      if (span !== null) text += ` · ${duration(span)} in all`;
    } else {
      text = `event ${position} / ${replay.count}`;
      if (at !== null && !st.replayDragging) text += ` · ${duration(Math.max(at, 0))}`;
      if (span !== null) text += ` of ${duration(span)}`;
    }
    text += replay.playing ? ` · playing ${replay.speed ? `${replay.speed}×` : 'max'}` : (replay.ended ? ' · ended' : ' · paused');
    $('#replay-position').textContent = text;
  }

  async function replayCall(path, body) {
    try {
      const answer = await api('POST', path, body);
      // A seek a later one superseded says where the replay was then: the later answer says where it is.
      if (answer.superseded) return;
      if ('position' in answer) showReplayClock(answer);
      else readReplayClock();
    } catch (err) {
      report(err);
    }
  }

  function replayToggle() {
    if (st.replay.playing) replayCall('/api/replay/pause', {});
    else replayCall('/api/replay/play', { speed: Number($('#replay-speed').value) });
  }

  async function replayStep(delta) {
    if (st.replay.playing) await replayCall('/api/replay/pause', {});
    const target = Math.min(Math.max(0, st.replay.position + delta), st.replay.count);
    if (target !== st.replay.position) await replayCall('/api/replay/seek', { event_index: target });
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
    const toggle = event.target.closest('[data-toggle]');
    if (toggle) {
      toggleOp(toggle.getAttribute('data-toggle'));
      return;
    }
    const badge = event.target.closest('[data-disarm]');
    if (badge) {
      disarmAt(badge.getAttribute('data-disarm'));
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
      case 'stop-on_enter': toggleStop('on_enter', 'cancel'); break;
      case 'stop-on_complete': toggleStop('on_complete', 'cancel'); break;
      case 'pause-on_enter': toggleStop('on_enter', 'pause'); break;
      case 'pause-on_complete': toggleStop('on_complete', 'pause'); break;
      case 'pause-plan': pauseControl('pause'); break;
      case 'resume-plan': pauseControl('resume'); break;
      case 'step-plan': pauseControl('step'); break;
      case 'replay-toggle': replayToggle(); break;
      case 'replay-back': replayStep(-1); break;
      case 'replay-forward': replayStep(1); break;
      case 'cancel-plan': cancelPlan(); break;
      case 'cancel-all': cancelAll(); break;
      case 'validate': validateOrSubmit(false); break;
      case 'submit': validateOrSubmit(true); break;
      case 'zoom-in': zoomBy(1); break;
      case 'zoom-out': zoomBy(-1); break;
      case 'zoom-reset': zoomBy(0); break;
      case 'goto-running': gotoRunning(); break;
      case 'goto-failed': reveal(action.dataset.opId); break;
      case 'full-op': loadFullOp(action.dataset.opId); break;
      case 'search-next': searchNext(); break;
      default:
    }
  }

  function onKey(event) {
    const op = event.target.closest && event.target.closest('g.op');
    if (!op) return;
    const opId = op.getAttribute('data-op-id');
    if (event.key === 'Enter' || event.key === ' ') selectOp(opId);
    else if (event.key === 'ArrowRight' || event.key === 'ArrowLeft') toggleOp(opId, event.key === 'ArrowRight');
    else return;
    event.preventDefault();
  }

  async function loadInfo() {  // resolves once the app is known (and, for a fleet, its robot)
    try {
      st.info = await api('GET', '/api/info');
    } catch (err) {
      report(err);
      return;
    }
    if ((st.info.operations || []).some((operation) => operation.name === 'get_replay')) enterReplayMode();
    if ((st.info.operations || []).some((operation) => operation.name === 'list_robots')) await enterFleetMode();
    const field = $('#token-field');
    field.hidden = !st.info.token_required;
    if (st.info.token_required && !st.token) showMessage('warn', 'this server needs a token for control actions: enter it at the top right');
  }

  function init() {
    document.addEventListener('click', onClick);
    $('#tree').addEventListener('keydown', onKey);
    const scroller = $('#tree-scroll');
    scroller.addEventListener('scroll', scheduleWindow, { passive: true });
    // Scrolling by hand ends "follow running": the view stays where the operator put it.
    scroller.addEventListener('wheel', () => { $('#follow-running').checked = false; }, { passive: true });
    window.addEventListener('resize', () => {
      scheduleWindow();
      st.minimapDirty = true;
      schedule();
    });
    const minimap = $('#minimap');
    minimap.addEventListener('pointerdown', (event) => {
      $('#follow-running').checked = false;
      minimap.setPointerCapture(event.pointerId);
      minimapScroll(event);
    });
    minimap.addEventListener('pointermove', (event) => {
      if (event.buttons) minimapScroll(event);
    });
    $('#follow-running').addEventListener('change', (event) => {
      if (event.target.checked) followRunning();
    });
    const search = $('#search');
    search.addEventListener('input', applySearch);
    search.addEventListener('keydown', (event) => {
      if (event.key !== 'Enter') return;
      event.preventDefault();
      searchNext();
    });
    const token = $('#token');
    token.value = st.token;
    token.addEventListener('input', () => {
      st.token = token.value.trim();
      if (st.token) sessionStorage.setItem(TOKEN_KEY, st.token);
      else sessionStorage.removeItem(TOKEN_KEY);
      // A stream refused for want of the token (beyond loopback), or still trying, is opened again with it.
      if (st.events && st.events.readyState !== EventSource.OPEN && st.connection !== 'closed') {
        st.events.close();
        connectEvents();
      }
    });
    $('#token-field').addEventListener('submit', (event) => event.preventDefault());
    const slider = $('#replay-slider');
    slider.addEventListener('input', () => {
      st.replayDragging = true;
      renderReplayPosition(Number(slider.value));
    });
    slider.addEventListener('change', async () => {
      st.replayDragging = false;
      await replayCall('/api/replay/seek', { event_index: Number(slider.value) });
    });
    $('#replay-speed').addEventListener('change', (event) => {
      if (st.replay && st.replay.playing) replayCall('/api/replay/play', { speed: Number(event.target.value) });
    });
    $('#plan-file').addEventListener('change', (event) => loadFile(event.target.files[0]));
    $('#follow').addEventListener('change', (event) => {
      if (event.target.checked && st.running[0]) selectPlan(st.running[0].plan_id);
    });
    $('#robot').addEventListener('change', (event) => chooseRobot(event.target.value));
    $('#robot-field').addEventListener('submit', (event) => event.preventDefault());
    renderDetails();
    // First what the app serves (a fleet's console must know its robot before it reads anything of it).
    loadInfo().then(() => {
      // A link to a plan reads its tree at once; the stream, once open, reads it again (no event missed).
      if (planInAddress() !== null) selectPlan(planInAddress());
      connectEvents();  // once open, it reads the lists and the selected tree: one read, no events missed
      startCellView();
    });
  }

  // ---------------------------------------------------------------- fleet
  //
  // Served by `bt-exec fleet --web`, the console shows one robot of the fleet at a time, picked at the top
  // (?robot=NAME in the address): its plans, its events, its controls. Plan ids are each robot's own.

  const ROBOTS_EVERY_MS = 5000;

  async function enterFleetMode() {
    $('#robot-field').hidden = false;
    const asked = new URLSearchParams(location.search).get('robot');
    await readRobots();
    while (!st.robots.length && asked === null) {  // nothing to show before a robot is found
      $('#robot-health').textContent = 'looking for robots…';
      await new Promise((resolve) => setTimeout(resolve, 1000));
      await readRobots();
    }
    st.robot = asked !== null ? asked : st.robots[0].robot;
    renderRobots();
    setInterval(async () => {
      await readRobots();
      renderRobots();
    }, ROBOTS_EVERY_MS);
  }

  async function readRobots() {
    try {
      st.robots = (await api('GET', '/api/robots')).robots || [];
    } catch (err) {
      report(err);
    }
  }

  function robotLabel(robot) {
    if (robot.health !== 'ok') return `${robot.robot} · ${robot.health}`;
    const plans = (robot.plans || []).length;
    return `${robot.robot} · ${plans} plan${plans === 1 ? '' : 's'} in flight`;
  }

  function renderRobots() {
    const select = $('#robot');
    const robots = st.robots.some((robot) => robot.robot === st.robot) ? st.robots
      : [{ robot: st.robot, health: 'not found' }, ...st.robots];
    select.replaceChildren(...robots.map((robot) =>
      h('option', { value: robot.robot, text: robotLabel(robot) })));
    select.value = st.robot;
    const current = robots.find((robot) => robot.robot === st.robot);
    const badge = $('#robot-health');
    badge.textContent = current.health === 'ok' ? '● answers' : `✗ ${current.health}`;
    badge.className = `robot-health ${current.health === 'ok' ? 'health-ok' : 'health-down'}`;
    badge.title = current.node ? `node ${current.node}` : 'this robot is not on the ROS domain now';
    document.title = `bt_exec · ${st.robot}`;
    $('[data-action="cancel-all"]').title = `Cancel every plan of ${st.robot}`;
  }

  function chooseRobot(robot) {
    if (robot === st.robot) return;
    // Everything on the page is the old robot's: read the new one's from the start.
    const query = new URLSearchParams(location.search);
    query.set('robot', robot);
    location.assign(`${location.pathname}?${query.toString()}`);
  }

  // ---------------------------------------------------------------- the simulated cell
  //
  // An app whose executor moves a simulated cell (bt-exec run --backend physics) shows the arm beside the tree:
  // its links drawn from the side and from above, the current skill's target marked, read from get_cell_view
  // (GET /api/cell) every CELL_EVERY_MS; where the server can render (a GL context), MuJoCo's frames too, each
  // asked for CELL_FRAME_GAP_MS after the last one came. The arm moves continuously and no event carries it: this
  // view polls.

  const CELL_EVERY_MS = 80;         // 12.5 drawings a second
  const CELL_FRAME = { width: 320, height: 240 };
  // Between two rendered frames: rendering in software (Mesa) takes the server's CPU the drawing needs too.
  const CELL_FRAME_GAP_MS = 400;
  const CELL_SCALE = 108;           // px per metre in both views
  const CELL_SIDE = { left: 4, top: 14, x0: -0.35, z0: -0.08, height: 178 };   // x to the right, z up
  const CELL_TOP = { left: 154, top: 14, x0: -0.35, y0: 0.75 };                 // x to the right, y up

  async function startCellView() {
    if (!(st.info.operations || []).some((operation) => operation.name === 'get_cell_view')) return;
    let view;
    try {
      view = await api('GET', '/api/cell');
    } catch (err) {
      report(err);
      return;
    }
    if (!view.cell) return;  // no simulated cell behind this app: no view
    $('#cell').hidden = false;
    st.cell = { drawn: 0, since: performance.now(), fps: 0 };
    drawCell(view);
    if (view.frames) readCellFrames();
    setInterval(readCell, CELL_EVERY_MS);
  }

  async function readCell() {
    if (document.hidden || st.cell.reading) return;
    st.cell.reading = true;
    try {
      drawCell(await api('GET', '/api/cell'));
    } catch (err) {
      $('#cell-facts').textContent = `no view: ${err.message}`;
    } finally {
      st.cell.reading = false;
    }
  }

  async function readCellFrames() {
    const image = $('#cell-frame');
    image.hidden = false;
    for (;;) {
      try {
        const view = await api('GET', `/api/cell?frame_width=${CELL_FRAME.width}&frame_height=${CELL_FRAME.height}`);
        if (view.frame) image.src = `data:image/png;base64,${view.frame}`;
      } catch (err) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      await new Promise((resolve) => setTimeout(resolve, CELL_FRAME_GAP_MS));
      while (document.hidden) await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  function sidePoint([x, , z]) {
    return [CELL_SIDE.left + (x - CELL_SIDE.x0) * CELL_SCALE, CELL_SIDE.top + CELL_SIDE.height - (z - CELL_SIDE.z0) * CELL_SCALE];
  }

  function topPoint([x, y]) {
    return [CELL_TOP.left + (x - CELL_TOP.x0) * CELL_SCALE, CELL_TOP.top + (CELL_TOP.y0 - y) * CELL_SCALE];
  }

  function drawCell(view) {
    const drawing = $('#cell-drawing');
    const parts = [
      s('text', { class: 'cell-caption', x: CELL_SIDE.left + 2, y: 10, text: 'side (x, z)' }),
      s('text', { class: 'cell-caption', x: CELL_TOP.left + 2, y: 10, text: 'top (x, y)' }),
      s('line', { class: 'cell-ground', x1: CELL_SIDE.left, x2: CELL_TOP.left - 6,
                  y1: sidePoint([0, 0, 0])[1], y2: sidePoint([0, 0, 0])[1] }),
      s('line', { class: 'cell-ground', x1: CELL_TOP.left - 3, x2: CELL_TOP.left - 3, y1: 4, y2: 192 }),
    ];
    for (const [project, name] of [[sidePoint, 'side'], [topPoint, 'top']]) {
      for (const [place, position] of Object.entries(view.places || {})) {
        const [x, y] = project(position);
        parts.push(s('circle', { class: 'cell-place', cx: x, cy: y, r: 1.8 }, s('title', { text: place })));
      }
      const points = view.links.map((link) => project(link.position));
      parts.push(s('polyline', { class: 'cell-arm', 'data-view': name,
                                 points: points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ') }));
      for (const [x, y] of points.slice(0, -1)) parts.push(s('circle', { class: 'cell-joint', cx: x, cy: y, r: 2.5 }));
      const [tx, ty] = points[points.length - 1];
      parts.push(s('circle', { class: 'cell-tool', cx: tx, cy: ty, r: 3.5 }));
      if (view.target) {
        const [gx, gy] = project(view.target);
        parts.push(s('g', { class: 'cell-target', 'data-view': name },
          s('circle', { cx: gx, cy: gy, r: 6 }),
          s('line', { x1: gx - 9, x2: gx + 9, y1: gy, y2: gy }),
          s('line', { x1: gx, x2: gx, y1: gy - 9, y2: gy + 9 }),
          s('title', { text: `target (${view.target.map((v) => v.toFixed(3)).join(', ')}) m` })));
      }
    }
    drawing.replaceChildren(...parts);
    const cell = st.cell;
    cell.drawn += 1;
    drawing.setAttribute('data-drawn', String(cell.drawn));
    const now = performance.now();
    if (now - cell.since >= 1000) {
      cell.fps = (cell.drawn - (cell.counted || 0)) * 1000 / (now - cell.since);
      cell.counted = cell.drawn;
      cell.since = now;
    }
    const fastest = Math.max(...view.joint_speeds.map(Math.abs));
    const tool = view.tool.map((v) => v.toFixed(3)).join(', ');
    $('#cell-facts').textContent = `tool (${tool}) m · fastest joint ${fastest.toFixed(2)} rad/s`
      + (cell.fps ? ` · ${cell.fps.toFixed(0)} fps` : '');
  }

  window.addEventListener('error', (event) => showMessage('error', `console bug: ${event.message}`));
  window.addEventListener('unhandledrejection', (event) => showMessage('error', `console bug: ${event.reason}`));
  init();
})();
