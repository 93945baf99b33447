// DOM building with text only: every string from a run (names, commands, issue texts) is
// untrusted and reaches the page through textContent or attribute properties, never as markup.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'style') Object.assign(node.style, v);
    else if (k === 'title') node.title = String(v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function section(id, title, intro, ...content) {
  return el('section', { id, class: 'card' }, el('h2', {}, title), intro ? el('p', { class: 'intro' }, intro) : null,
            ...content);
}
