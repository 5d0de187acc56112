#!/usr/bin/env bash
# Prepare a GPU machine that has PyTorch with CUDA but no package registry: `make gpu-wheels`, on a machine with
# internet, downloads into .whl/ the wheels that machine lacks (the Jupyter kernel and client that execute the
# notebooks, Altair and ipywidgets; versions from .ci/constraints.txt, for Python 3.12 on x86-64 Linux), and copies
# the course's data (Tiny Shakespeare, Multi30k) from COURSE_DATA_MIRROR into data/. Both folders are ignored by git:
# carry them to the GPU machine with the repository, then run `make gpu-check` there, which installs the wheels first.
# Chapter 10's transformers and what it imports (about 25 MB more) come only with HF=1: images made for GPU work
# usually have them already, and the wheels and the repository must fit a transfer of 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES="nbclient nbformat ipykernel jupyter_client jupyter_core pyzmq tornado traitlets comm debugpy ipython
ipython_pygments_lexers matplotlib-inline nest-asyncio2 jedi parso prompt_toolkit wcwidth pexpect ptyprocess stack-data
executing asttokens pure_eval fastjsonschema jsonschema jsonschema-specifications referencing rpds-py platformdirs
altair narwhals ipywidgets widgetsnbextension jupyterlab_widgets typing_extensions packaging"
if [ "${HF:-0}" = 1 ]; then
    PACKAGES="$PACKAGES transformers huggingface-hub tokenizers safetensors regex pyyaml filelock fsspec hf-xet httpx2
httpcore2 h11 anyio idna truststore click typer rich markdown-it-py mdurl pygments shellingham pydantic pydantic-core
annotated-doc annotated-types typing-inspection tqdm"
fi
mkdir -p .whl
for name in $PACKAGES; do
    pin=$(grep -i "^${name}==" .ci/constraints.txt | head -1)
    if [ -z "$pin" ]; then echo "no version of $name in .ci/constraints.txt" >&2; exit 1; fi
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$pin"
done
echo "$(ls .whl | wc -l) wheels in .whl/ ($(du -sh .whl | cut -f1))"
mirror=${COURSE_DATA_MIRROR:-../shared/data}
if [ -d "$mirror" ]; then
    for item in "$mirror"/*; do  # the data, not the mirror's own README (data/ has its own, tracked)
        [ "$(basename "$item")" = README.md ] || cp -r "$item" data/
    done
    echo "data copied from $mirror into data/"
else
    echo "no data mirror at $mirror: the GPU machine will need data/ filled another way (it cannot download)"
fi
