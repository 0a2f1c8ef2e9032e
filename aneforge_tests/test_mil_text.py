"""MIL text in the primer's format: golden programs and a structural check."""
import re

import numpy as np

import aneforge as af

HEADER = ('program(1.3)\n'
          '[buildInfo = dict<string, string>({{"coremlc-component-MIL", "3520.4.1"}, '
          '{"coremlc-version", "3520.5.1"}})]\n{\n')


def test_golden_relu():
    assert af.to_mil(af.ones(1, 4).relu()) == HEADER + (
        '    func main<ios18>(tensor<fp16, [1, 4]> x_0) {\n'
        '        tensor<fp16, [1, 4]> relu_1 = relu(x = x_0)[name = string("relu_1")];\n'
        '    } -> (relu_1);\n'
        '}\n')


def test_golden_issue_example():
    x, w = af.ones(4, 8), af.ones(8, 3)
    text = af.to_mil((x @ w).relu().sum(dim=1, keepdim=True) / 3)
    assert text == HEADER + (
        '    func main<ios18>(tensor<fp16, [4, 8]> x_0, tensor<fp16, [8, 3]> x_1) {\n'
        '        tensor<fp16, [4, 3]> matmul_2 = matmul(x = x_0, y = x_1, transpose_x = const(bool(false)), '
        'transpose_y = const(bool(false)))[name = string("matmul_2")];\n'
        '        tensor<fp16, [4, 3]> relu_3 = relu(x = matmul_2)[name = string("relu_3")];\n'
        '        tensor<fp16, [4, 1]> reduce_sum_4 = reduce_sum(x = relu_3, axes = const(tensor<int32, [1]>([1])), '
        'keep_dims = const(bool(true)))[name = string("reduce_sum_4")];\n'
        '        tensor<fp16, []> const_5 = const(val = fp16(3))[name = string("const_5")];\n'
        '        tensor<fp16, [4, 1]> real_div_6 = real_div(x = reduce_sum_4, y = const_5)'
        '[name = string("real_div_6")];\n'
        '    } -> (real_div_6);\n'
        '}\n')


def test_golden_multi_output_casts_and_hex_constants():
    x = af.ones(2, 4)
    a, b = x.split(2, dim=1)
    p = af.program(a.log(), b > 0.5, x.argmax(1))
    text = af.to_mil(p)
    assert 'log(x = split_1, epsilon = const(fp16(0)))' in text
    assert ('tensor<fp16, [2, 2]> split_1, tensor<fp16, [2, 2]> split_2 = split(x = x_0, '
            'split_sizes = const(tensor<int32, [2]>([2, 2])), axis = const(int32(1)))') in text
    # bool leaves the program as uint8, int32 as two uint16 parts: the ANE's I/O dtypes
    assert 'cast(x = greater_5, dtype = string("uint8"))' in text
    assert 'dtype = string("uint16")' in text and "io_concat" in text
    hexes = af.to_mil(af.program(af.ones(2) + af.tensor(1.0) * 0 + _const([1.0, 2.0])))
    assert "tensor<fp16, [2]>([0x3c00, 0x4000])" in hexes


def _const(values):
    from aneforge.tensor import const
    return const(np.array(values), af.float16)


STATEMENT = re.compile(r'^        (tensor<\w+, \[[\d, ]*\]> \w+(, )?)+ = (\w+)\((.*)\)\[name = string\("(\w+)"\)\];$')


def check_structure(text: str) -> None:
    """Every statement is well formed, names are unique, every use follows its definition."""
    lines = text.splitlines()
    assert lines[0] == "program(1.3)" and lines[-1] == "}"
    sig = re.match(r"^    func main<ios18>\((.*)\) \{$", lines[3])
    assert sig, lines[3]
    defined = set(re.findall(r"> (\w+)", sig.group(1)))
    for line in lines[4:-2]:
        m = STATEMENT.match(line)
        assert m, line
        outs = re.findall(r"> (\w+)", line.split(" = ")[0])
        assert m.group(5) == outs[0]
        for used in re.findall(r"= (\w+)(?=[,)])|\((\w+)(?=[,)])", m.group(4)):
            name = used[0] or used[1]
            if not name[0].isdigit() and name not in ("true", "false"):
                assert name in defined, f"{name} used before definition in: {line}"
        assert not defined & set(outs), line
        defined |= set(outs)
    ret = re.match(r"^    \} -> \((.*)\);$", lines[-2])
    assert ret and all(n in defined for n in ret.group(1).split(", "))


def test_structure_of_a_varied_program():
    x = af.randn(2, 3, 4)
    y = af.cat([x.softmax(-1), x.exp().permute(0, 2, 1).reshape(2, 3, 4)], dim=0)
    z = af.where(y > 0.1, y, y.sqrt())[:, 1:, None].sum((0, 1))
    check_structure(af.to_mil(z))
