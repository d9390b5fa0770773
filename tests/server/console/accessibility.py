"""An accessibility check of a console page, run inside the real browser (no download: axe-core
cannot be fetched on these machines, so this is a small check of our own, WCAG 2.1 AA's
rules that a page of ours can break).

``problems(page)`` evaluates ``CHECK`` in the page and returns one line per problem:

1. every form control (input that is not hidden, select, textarea) has an accessible name:
   a ``<label for>``, ``aria-label`` or ``aria-labelledby``; every button and link has a name;
2. every ``img`` has an ``alt``; every ``svg`` is either hidden from assistive technology or
   ``role="img"`` with a name;
3. the page has exactly one ``h1``, and its headings skip no level going down;
4. every visible text's colour against its background (the first ancestor's opaque
   ``background-color``, white at the top) has a contrast ratio of at least 4.5:1, or 3:1 for
   large text (24px, or 18.66px bold): the ratio of WCAG's relative luminances.

``keyboard_problems(page)`` checks the keyboard: Tab from the top reaches the skip link first
(visible while focused), then the pages' links in order, each with a visible focus outline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = ["CHECK", "keyboard_problems", "problems"]

CHECK = r"""
() => {
  const out = [];
  const visible = (el) => {
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    return box.width > 1 && box.height > 1 && style.visibility !== "hidden"
      && style.display !== "none" && !el.closest("[aria-hidden=true], .sr");
  };
  const where = (el) => {
    const id = el.id ? "#" + el.id : "";
    const cls = el.className && typeof el.className === "string"
      ? "." + el.className.trim().split(/\s+/).join(".") : "";
    return el.tagName.toLowerCase() + id + cls;
  };
  const named = (el) => {
    if ((el.getAttribute("aria-label") || "").trim()) return true;
    const by = el.getAttribute("aria-labelledby");
    if (by && by.split(/\s+/).some((id) => (document.getElementById(id)?.textContent || "").trim())) return true;
    if (el.labels && [...el.labels].some((l) => l.textContent.trim())) return true;
    return false;
  };
  // 1. form controls, buttons and links have names
  for (const el of document.querySelectorAll("input, select, textarea")) {
    if (el.type === "hidden") continue;
    if (!named(el)) out.push(`form control without a label: ${where(el)} name=${el.name}`);
  }
  for (const el of document.querySelectorAll("button, a[href]")) {
    const text = (el.textContent || "").trim() || el.getAttribute("aria-label")
      || el.querySelector("img[alt]")?.alt;
    if (!text && !named(el)) out.push(`${el.tagName.toLowerCase()} without a name: ${where(el)}`);
  }
  // 2. images have text alternatives
  for (const el of document.querySelectorAll("img")) {
    if (!el.hasAttribute("alt")) out.push(`img without alt: ${el.src}`);
  }
  for (const el of document.querySelectorAll("svg")) {
    if (el.closest("[aria-hidden=true]")) continue;
    const name = (el.getAttribute("aria-label") || el.querySelector("title")?.textContent || "").trim();
    if (el.getAttribute("role") !== "img" || !name) out.push(`svg neither hidden nor a named img: ${where(el)}`);
  }
  // 3. headings
  const headings = [...document.querySelectorAll("h1, h2, h3, h4, h5, h6")];
  const ones = headings.filter((h) => h.tagName === "H1").length;
  if (ones !== 1) out.push(`${ones} h1 headings (one wanted)`);
  let level = 0;
  for (const h of headings) {
    const now = Number(h.tagName[1]);
    if (now > level + 1) out.push(`heading level skipped: ${h.tagName} "${h.textContent.trim()}" after h${level}`);
    level = now;
  }
  // 4. contrast of visible text
  const rgba = (text) => {
    const m = text.match(/rgba?\(([^)]+)\)/);
    if (!m) return [0, 0, 0, 1];
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => {  // top composited over an opaque colour
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)).concat(1);
  };
  const background = (el) => {
    const layers = [];
    for (let at = el; at; at = at.parentElement) {
      const colour = rgba(getComputedStyle(at).backgroundColor);
      if (colour[3] > 0) layers.push(colour);
      if (colour[3] >= 1) break;
    }
    let result = [255, 255, 255, 1];
    for (const layer of layers.reverse()) result = over(layer, result);
    return result;
  };
  const luminance = (c) => {
    const [r, g, b] = c.slice(0, 3).map((v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const checked = new Set();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || checked.has(el) || !visible(el)) continue;
    if (el.closest("svg, script, style")) continue;
    checked.add(el);
    const style = getComputedStyle(el);
    const back = background(el);
    const fore = over(rgba(style.color), back);
    const size = parseFloat(style.fontSize);
    const bold = Number(style.fontWeight) >= 700;
    const needed = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    const got = ratio(fore, back);
    if (got < needed) {
      out.push(`contrast ${got.toFixed(2)}:1 < ${needed}:1 for "${node.textContent.trim().slice(0, 40)}" in ${where(el)} (${style.color} on rgb(${back.slice(0, 3).map(Math.round).join(", ")}))`);
    }
  }
  return out;
}
"""

FOCUSED = r"""
() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  const box = el.getBoundingClientRect();
  return {
    tag: el.tagName.toLowerCase(), text: (el.textContent || "").trim(),
    cls: el.className || "", href: el.getAttribute("href") || "",
    outline: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 1,
    onScreen: box.right > 0 && box.bottom > 0 && box.left < innerWidth && box.top < innerHeight,
  };
}
"""


def problems(page: Page) -> list[str]:
    """The page's problems (see the module docstring), one line each; [] when none."""
    return list(page.evaluate(CHECK))


def keyboard_problems(page: Page, links: list[str]) -> list[str]:
    """Tab from the top of the page: the skip link first, then ``links`` (their texts) in
    order, each shown and outlined when focused; then the skip link's Enter moves the focus
    to the page's main part."""
    found: list[str] = []
    page.reload()
    page.keyboard.press("Tab")
    first = page.evaluate(FOCUSED)
    if not first or "skip" not in str(first["cls"]):
        found.append(f"the first Tab reaches {first}, not the skip link")
    for focused, text in [(first, "skip link")] + [(None, t) for t in links]:
        if focused is None:
            page.keyboard.press("Tab")
            focused = page.evaluate(FOCUSED)
            if not focused or focused["text"] != text:
                found.append(f"Tab reaches {focused}, not the link {text!r}")
                continue
        if not focused["outline"]:
            found.append(f"no visible focus outline on {text!r}")
        if not focused["onScreen"]:
            found.append(f"{text!r} is off screen while focused")
    page.reload()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    if page.evaluate("() => document.activeElement?.id") != "main":
        found.append("the skip link's Enter does not move the focus to the main part")
    return found
