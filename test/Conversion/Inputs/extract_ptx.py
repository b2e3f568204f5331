"""Writes the PTX of `gpu.binary @NAME` (cmask-opt --cmask-gpu-to-binary
output, format isa) to stdout: the object's `assembly` string, unescaped.
    python extract_ptx.py FILE.mlir NAME > NAME.ptx
"""
import re
import sys

text = open(sys.argv[1]).read()
name = sys.argv[2]
found = re.search(r'gpu\.binary @' + re.escape(name) +
                  r'\s*\[#gpu\.object<[^\n]*?assembly = "((?:[^"\\]|\\.)*)"',
                  text)
if not found:
    sys.exit(f"no gpu.binary @{name} with an assembly in {sys.argv[1]}")
escaped, out, i = found.group(1), bytearray(), 0
while i < len(escaped):
    if escaped[i] == '\\':
        code = escaped[i + 1:i + 3]
        if re.fullmatch(r'[0-9A-Fa-f]{2}', code):
            out.append(int(code, 16))
            i += 3
        else:
            out += escaped[i + 1].encode()
            i += 2
    else:
        out += escaped[i].encode()
        i += 1
sys.stdout.buffer.write(bytes(out).rstrip(b'\0'))
