from iclr25.core.testing import readme_code_blocks


def test_readme_examples_run():
    blocks = readme_code_blocks("iclr25-core")
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
