// The page side of the assertion tools. browser_evaluate runs it as
// `() => (PROBE)(PLAN)`; it reads the page, never changes it, and answers a
// short summary (never the page's text):
//   text:    {url, blank, found?: {tag, context, inViewport}, hidden: [{tag, hidden, context}], near: [text]}
//   element: {url, blank, candidates: [{role, name, text, ariaLabel, placeholder, title, alt, tag, hidden, inViewport}], more}
// Which candidate matches is decided by the hub (src/assertions/locator.rs);
// this script only finds possible ones (by role, or holding a needle) and
// says whether each is visible, and if not, why.
(plan) => {
  try {
    const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'TITLE', 'META', 'LINK']);
    const BLOCK = new Set(['ADDRESS', 'ARTICLE', 'ASIDE', 'BLOCKQUOTE', 'BR', 'BUTTON', 'DD', 'DIV', 'DL',
      'DT', 'FIELDSET', 'FIGCAPTION', 'FIGURE', 'FOOTER', 'FORM', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6',
      'HEADER', 'HR', 'LABEL', 'LI', 'MAIN', 'NAV', 'OL', 'OPTION', 'P', 'PRE', 'SECTION', 'TABLE',
      'TD', 'TH', 'TR', 'UL']);
    const norm = (s) => (s || '').replace(/\s+/g, ' ').trim();
    const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + '\u2026' : s);
    const tagOf = (el) => el.tagName.toLowerCase();
    const de = document.documentElement;
    const root = document.body || de;
    const texts = new Map();
    // Rendered-ish text: scripts and styles left out, blocks apart.
    const textOf = (node) => {
      let s = texts.get(node);
      if (s !== undefined) return s;
      s = '';
      for (const c of node.childNodes) {
        if (c.nodeType === 3) s += c.data;
        else if (c.nodeType === 1 && !SKIP.has(c.tagName)) {
          const t = textOf(c);
          s += BLOCK.has(c.tagName) ? ' ' + t + ' ' : t;
        }
      }
      texts.set(node, s);
      return s;
    };
    const out = { url: location.href, blank: location.href === 'about:blank' && !norm(textOf(root)) };
    if (out.blank) return out;

    const scrolls = (axis) => [de, document.body].every((e) => {
      if (!e) return true;
      const o = getComputedStyle(e)[axis];
      return o !== 'hidden' && o !== 'clip';
    });
    const clips = (o) => o === 'hidden' || o === 'clip';
    // [why it is not visible or null, whether it is in the viewport now]
    const visibility = (el) => {
      if (!el.isConnected) return ['detached', false];
      const r = el.getBoundingClientRect();
      let fixed = false;
      for (let e = el; e; e = e.parentElement) {
        const cs = getComputedStyle(e);
        const on = e === el ? '' : ' on <' + tagOf(e) + '>';
        if (cs.display === 'none') return ['display:none' + on, false];
        if (parseFloat(cs.opacity) === 0) return ['opacity:0' + on, false];
        if (cs.position === 'fixed') fixed = true;
        if (e !== el && e !== de && e !== document.body) {
          const b = e.getBoundingClientRect();
          const outX = clips(cs.overflowX) && (r.right <= b.left || r.left >= b.right);
          const outY = clips(cs.overflowY) && (r.bottom <= b.top || r.top >= b.bottom);
          if (outX || outY) return ['clipped by overflow:hidden' + on, false];
        }
      }
      const v = getComputedStyle(el).visibility;
      if (v !== 'visible') return ['visibility:' + v, false];
      if (r.width === 0 || r.height === 0) return ['zero size', false];
      const vw = window.innerWidth;
      const vh = window.innerHeight;
      if (r.right > 0 && r.bottom > 0 && r.left < vw && r.top < vh) return [null, true];
      if (fixed) return ['off-screen (position:fixed)', false];
      const sw = Math.max(de.scrollWidth, root.scrollWidth);
      const sh = Math.max(de.scrollHeight, root.scrollHeight);
      const needX = r.right <= 0 || r.left >= vw;
      const needY = r.bottom <= 0 || r.top >= vh;
      const okX = !needX || (scrolls('overflowX') && r.right + window.scrollX > 0 && r.left + window.scrollX < sw);
      const okY = !needY || (scrolls('overflowY') && r.bottom + window.scrollY > 0 && r.top + window.scrollY < sh);
      return okX && okY ? [null, false] : ['off-screen, out of the page\'s scroll range', false];
    };

    if (plan.mode === 'text') {
      const want = norm(plan.text);
      const fold = (s) => (plan.exact ? s : s.toLowerCase());
      const needle = fold(want);
      const has = (el) => fold(norm(textOf(el))).includes(needle);
      // The smallest elements that hold the text.
      const found = [];
      const visit = (el) => {
        let inChild = false;
        for (const c of el.children) {
          if (!SKIP.has(c.tagName) && has(c)) {
            inChild = true;
            visit(c);
          }
        }
        if (!inChild) found.push(el);
      };
      if (needle && has(root)) visit(root);
      const matches = plan.exact ? found.filter((el) => norm(textOf(el)) === want) : found;
      const contextOf = (el, max) => {
        const t = norm(textOf(el));
        const at = Math.max(0, fold(t).indexOf(needle));
        const from = Math.max(0, at - 60);
        const to = Math.min(t.length, at + want.length + 60);
        return clip((from > 0 ? '\u2026' : '') + t.slice(from, to) + (to < t.length ? '\u2026' : ''), max);
      };
      const hidden = [];
      for (const el of matches) {
        const [why, inViewport] = visibility(el);
        if (!why) return { ...out, found: { tag: tagOf(el), context: contextOf(el, 200), inViewport } };
        if (hidden.length < 3) hidden.push({ tag: tagOf(el), hidden: why, context: contextOf(el, 80) });
      }
      if (hidden.length) return { ...out, hidden };
      // Nothing: visible texts that share a needle, for "nearest text".
      const near = [];
      const seen = new Set();
      for (const el of root.querySelectorAll('*')) {
        if (SKIP.has(el.tagName)) continue;
        if (!Array.from(el.childNodes).some((c) => c.nodeType === 3 && c.data.trim())) continue;
        const raw = textOf(el);
        const t = raw.length > 4000 ? '' : norm(raw);
        if (!t || seen.has(t) || !plan.needles.some((n) => t.toLowerCase().includes(n))) continue;
        seen.add(t);
        if (visibility(el)[0]) continue;
        near.push(clip(t, 120));
        if (near.length >= 50) break;
      }
      return { ...out, near };
    }

    const implicitRole = (el) => {
      const type = (el.getAttribute('type') || '').toLowerCase();
      switch (el.tagName) {
        case 'A': case 'AREA': return el.hasAttribute('href') ? 'link' : '';
        case 'BUTTON': case 'SUMMARY': return 'button';
        case 'INPUT':
          if (['button', 'submit', 'reset', 'image'].includes(type)) return 'button';
          if (type === 'checkbox' || type === 'radio') return type;
          if (type === 'range') return 'slider';
          if (type === 'number') return 'spinbutton';
          if (type === 'search') return 'searchbox';
          return ['', 'text', 'email', 'tel', 'url', 'password'].includes(type) ? 'textbox' : '';
        case 'TEXTAREA': return 'textbox';
        case 'SELECT': return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
        case 'H1': case 'H2': case 'H3': case 'H4': case 'H5': case 'H6': return 'heading';
        case 'IMG': return el.getAttribute('alt') === '' ? '' : 'img';
        case 'LI': return 'listitem';
        case 'DIALOG': return 'dialog';
        case 'OPTION': return 'option';
        case 'NAV': return 'navigation';
        case 'TABLE': return 'table';
        default: return '';
      }
    };
    const NAME_FROM_CONTENT = new Set(['button', 'link', 'heading', 'tab', 'menuitem', 'menuitemcheckbox',
      'menuitemradio', 'option', 'checkbox', 'radio', 'switch', 'listitem', 'cell', 'row', 'tooltip', 'treeitem']);
    const attr = (el, a) => norm(el.getAttribute(a));
    const nameOf = (el, role) => {
      const ids = el.getAttribute('aria-labelledby');
      if (ids) {
        const n = norm(ids.split(/\s+/).map((id) => document.getElementById(id))
          .filter(Boolean).map((e) => textOf(e)).join(' '));
        if (n) return n;
      }
      if (attr(el, 'aria-label')) return attr(el, 'aria-label');
      if (['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName)) {
        const type = (el.getAttribute('type') || '').toLowerCase();
        if (['button', 'submit', 'reset'].includes(type)) {
          return norm(el.value) || (type === 'submit' ? 'Submit' : type === 'reset' ? 'Reset' : '');
        }
        if (type === 'image') return attr(el, 'alt');
        const labels = el.labels ? norm(Array.from(el.labels).map((l) => textOf(l)).join(' ')) : '';
        return labels || attr(el, 'title') || attr(el, 'placeholder');
      }
      if (el.tagName === 'IMG') return attr(el, 'alt') || attr(el, 'title');
      if (NAME_FROM_CONTENT.has(role)) return norm(textOf(el)) || attr(el, 'title');
      return attr(el, 'title');
    };

    const roles = plan.roles || [];
    const hit = (s) => !!s && plan.needles.some((n) => s.toLowerCase().includes(n));
    const candidates = [];
    let more = false;
    for (const el of root.querySelectorAll('*')) {
      if (SKIP.has(el.tagName)) continue;
      const role = attr(el, 'role').split(' ')[0] || implicitRole(el);
      const name = role ? nameOf(el, role) : '';
      // (A long text is never a candidate's text: skip normalising it.)
      const raw = textOf(el);
      const full = raw.length > 4000 ? '' : norm(raw);
      // Its text counts when short and not only a wrapper's copy of a child's.
      const text = full && full.length <= 150 && !Array.from(el.children).some((c) => norm(textOf(c)) === full) ? full : '';
      const c = {
        role, name, text, ariaLabel: attr(el, 'aria-label'), placeholder: attr(el, 'placeholder'),
        title: attr(el, 'title'), alt: attr(el, 'alt'),
      };
      if (!roles.includes(role) && ![c.name, c.text, c.ariaLabel, c.placeholder, c.title, c.alt].some(hit)) continue;
      if (candidates.length >= 200) {
        more = true;
        break;
      }
      for (const k of ['name', 'text', 'ariaLabel', 'placeholder', 'title', 'alt']) {
        if (c[k]) c[k] = clip(c[k], 100);
        else delete c[k];
      }
      const [why, inViewport] = visibility(el);
      candidates.push({ ...c, tag: tagOf(el), hidden: why, inViewport });
    }
    return { ...out, candidates, more };
  } catch (e) {
    return { url: location.href, error: String((e && e.message) || e).slice(0, 300) };
  }
}
