# SPDX-License-Identifier: MIT
# prom.py - a strict reader of the Prometheus text exposition format
# (0.0.4) for the metrics tests: python3 prom.py FILE prints one line per
# sample, "NAME<TAB>LABELS-AS-JSON<TAB>VALUE", the label values unescaped,
# and exits 1 on a line it cannot read. Imported, series(text) gives
# [(name, {label: value}, float)].
import json
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'


def unescape(v):
    return re.sub(r'\\([\\"n])', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def series(text):
    out = []
    for ln in text.split("\n"):
        if not ln or ln.startswith("#"):
            continue
        m = re.fullmatch(r"(%s)(?:\{(.*)\})? (\S+)" % NAME, ln)
        if not m:
            raise ValueError("bad sample line: %r" % ln)
        labels, rest = {}, m.group(2) or ""
        while rest:
            lm = re.match(LABEL + r",?", rest)
            if not lm:
                raise ValueError("bad labels: %r" % ln)
            labels[lm.group(1)] = unescape(lm.group(2))
            rest = rest[lm.end():]
        out.append((m.group(1), labels, float(m.group(3))))
    return out


if __name__ == "__main__":
    try:
        for n, l, v in series(open(sys.argv[1], encoding="utf-8").read()):
            print("%s\t%s\t%s" % (n, json.dumps(l, sort_keys=True), repr(v)))
    except (ValueError, UnicodeDecodeError) as e:
        print("prom.py: %s" % e, file=sys.stderr)
        sys.exit(1)
