"""No function in trainer/model/ is longer than 100 lines (the project's code rule).

A function is a brace block opened at namespace or class scope by text that ends in a
parameter list (`...) {`, `...) const {`, `...) override {`, a constructor's initialiser list);
its length runs from the first line of its signature to the line of its closing brace. Lambdas and
local blocks count as part of the function they are in. Comments, string and character
literals are blanked first, so braces inside them do not count.
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODEL = ROOT / "trainer" / "model"
LIMIT = 100
LITERALS = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                      re.DOTALL)
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$")


def blank(text):
    """`text` with comments and literals replaced by spaces, newlines kept."""
    return LITERALS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def functions(text):
    """(first line, last line) of every function body in C++ source `text`."""
    code = blank(text)
    found, stack, start = [], [], 0  # per open brace: "scope", "block" or ("function", line)
    line = 1
    for i, ch in enumerate(code):
        if ch == "\n":
            line += 1
        elif ch == "{":
            head = code[start:i].strip()
            if any(isinstance(kind, tuple) for kind in stack):
                stack.append("block")
            elif SCOPE.search(head) or not re.search(r"\)[^;{}]*$", head):
                stack.append("scope")
            else:
                # From the head's first line (the signature), as a reader counts it.
                lead = re.match(r"\s*(?:(?:public|private|protected)\s*:\s*)*", code[start:i])
                head_start = start + lead.end()
                stack.append(("function", code.count("\n", 0, head_start) + 1))
            start = i + 1
        elif ch == "}":
            top = stack.pop() if stack else "scope"
            if isinstance(top, tuple):
                found.append((top[1], line))
            start = i + 1
        elif ch == ";":
            start = i + 1
    return found


def long_functions(paths):
    out = []
    for path in paths:
        for first, last in functions(path.read_text(encoding="utf-8")):
            if last - first + 1 > LIMIT:
                shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                out.append(f"{shown}:{first}: {last - first + 1} lines")
    return out


def test_no_function_over_the_limit():
    paths = sorted(p for p in MODEL.rglob("*") if p.suffix in {".h", ".cpp"})
    assert paths
    found = long_functions(paths)
    assert not found, f"functions over {LIMIT} lines in trainer/model/:\n" + "\n".join(found)


def test_the_scanner_measures_functions(tmp_path):
    body = "\n".join(f"  x += {i};" for i in range(LIMIT - 2))
    source = tmp_path / "probe.cpp"
    source.write_text(
        "namespace a {\nclass B {\n public:\n  int Short() const { return 1; }\n};\n"
        f"int Long(int x) {{\n{body}\n}}\n"
        f"B::B() : x_(0) {{\n  auto f = [] {{ return '{{'; }};\n  // }} {{\n{body}\n  return;\n}}\n"
        "}  // namespace a\n")
    spans = functions(source.read_text())
    assert spans[0] == (4, 4)
    assert spans[1][1] - spans[1][0] + 1 == LIMIT  # at the limit: allowed
    assert long_functions([source]) == [f"probe.cpp:{spans[2][0]}: {LIMIT + 3} lines"]
    # A signature over several lines counts from its first.
    wrapped = tmp_path / "wrapped.cpp"
    wrapped.write_text(f"void F(int a,\n       int b) {{\n{body}\n}}\n")
    assert functions(wrapped.read_text()) == [(1, LIMIT + 1)]
