"""pprof_tags.py - parses `go tool pprof -tags` output (shared by the label
tests: tests/prof/labels_agree_test.sh, tests/profiling/daemon_labels_test.sh,
tests/profiling/tui_labels_test.sh). Not a test itself."""
import re


def tags(text):
    """{key: {value: count}} from the text `go tool pprof -tags` prints."""
    out, key = {}, None
    for line in text.splitlines():
        m = re.match(r"^ (\S+): Total ([\d.]+)$", line)
        if m:
            key = m.group(1)
            out[key] = {}
            continue
        m = re.match(r"^\s+([\d.]+) \(\s*[\d.]+%\): (.*)$", line)
        if m and key:
            out[key][m.group(2)] = float(m.group(1))
    return out
