"""mdparse.py — the small Markdown reader the docs test needs: fenced blocks (with the marker
comment before each), headings as GitHub anchors, and links. Not a Markdown renderer: it reads
only what check_docs.py checks, and is exact about those (fences by their opening backticks,
GitHub's anchor rule, links outside code)."""
import re
from dataclasses import dataclass, field

MARK = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->")


@dataclass
class Block:
    path: str
    line: int          # 1-based line of the opening fence
    lang: str          # the info string's first word, lower case ("" when none)
    text: str          # the block's content, ending with a newline (or empty)
    marker: str = ""   # the docs-test marker just before the block, if any


@dataclass
class Page:
    path: str
    blocks: list = field(default_factory=list)
    anchors: set = field(default_factory=set)
    links: list = field(default_factory=list)  # (line, target)


def slug(heading):
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links -> their text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def parse(path):
    page = Page(path)
    lines = open(path, encoding="utf-8").read().split("\n")
    fence = None
    marker = ""
    seen = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if fence is None:
            m = re.match(r"(`{3,})(.*)$", stripped)
            if m:
                indent = len(line) - len(stripped)
                fence = (m.group(1), indent, i, m.group(2).strip().split(" ")[0].lower(), [])
                i += 1
                continue
            mk = MARK.search(line)
            if mk:
                marker = mk.group(1)
            elif line.strip():
                marker = "" if not line.strip().startswith("<!--") else marker
            h = re.match(r"(#{1,6}) (.*)$", line)
            if h:
                base = slug(h.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                page.anchors.add(base if n == 0 else f"{base}-{n}")
            for m in re.finditer(r"(?<!`)\[[^\]]*\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
                page.links.append((i + 1, m.group(1)))
        else:
            ticks, indent, start, lang, body = fence
            if stripped.startswith(ticks) and stripped.strip("`") == "":
                text = "\n".join(l[indent:] if l[:indent].strip() == "" else l for l in body)
                page.blocks.append(Block(path, start + 1, lang, text + "\n" if body else "", marker))
                fence = None
                marker = ""
            else:
                body.append(line)
        i += 1
    if fence is not None:
        raise SystemExit(f"{path}:{fence[2] + 1}: unclosed code fence")
    return page
