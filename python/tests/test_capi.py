"""The ctypes structs against the header: a C program prints sizeof and
every field's offset as the compiler lays them out."""
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fattn import _capi

ROOT = Path(__file__).resolve().parents[2]


def test_struct_layouts(tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to read the header's layouts")
    lines = []
    for cname, cls in _capi.STRUCTS.items():
        lines.append(f'printf("{cname} size %zu\\n", sizeof({cname}));')
        for field, _ in cls._fields_:
            lines.append(f'printf("{cname} {field} %zu\\n", offsetof({cname}, {field}));')
    src = tmp_path / "layout.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "fattn.h"\n'
                   "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", str(ROOT / "include"), str(src), "-o", str(exe)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    out = {}
    for line in got.splitlines():
        cname, field, value = line.split()
        out.setdefault(cname, []).append((field, int(value)))
    seen = 0
    for cname, cls in _capi.STRUCTS.items():
        entries = out[cname]   # sizeof first, then each field's offset
        assert entries[0] == ("size", ctypes.sizeof(cls)), (cname, "sizeof")
        assert len(entries) == len(cls._fields_) + 1
        for (field, off), (name, _) in zip(entries[1:], cls._fields_):
            assert field == name and off == getattr(cls, name).offset, (cname, field)
            seen += 1
    assert seen > 60
