# The grader's image: each submission's kernel runs in a container of its own made from it, where bubblewrap cannot
# run (macOS, Windows; docs/instructor_guide.md, "Where the kernel runs"). Built from a checkout, it holds that
# checkout's course_utils: the grader refuses an image whose course differs from its own, so rebuild it after a pull.
#
#   docker build -t course-grader -f tools/grader.Dockerfile .          (or: podman build ...)
#   python -m course_utils.grade --sandbox docker submissions/*/*.ipynb  (or: --sandbox podman)
#
# BASE: any image with Python 3.11 or later and pip (a Debian-based one has setpriv and a shell).
ARG BASE=python:3.11-slim
FROM ${BASE}

# One virtual environment, on the PATH: the same on an image whose system Python pip may not change (PEP 668).
RUN python3 -m venv /opt/course
ENV PATH=/opt/course/bin:$PATH PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# PyTorch's CPU build (a plain `pip install torch` would fetch the multi-GB CUDA one), then the course and what runs
# a notebook. TORCH_INDEX may name a folder holding the CPU wheel instead (podman build -v wheels:/wheels ...).
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN if [ -d "$TORCH_INDEX" ]; then pip install "$(ls "$TORCH_INDEX"/torch-*+cpu-*.whl | head -n 1)"; \
    else pip install --index-url "$TORCH_INDEX" --extra-index-url https://pypi.org/simple torch; fi
COPY pyproject.toml requirements.txt README.md /course/
COPY course_utils /course/course_utils
RUN pip install "/course[hf]" "nbclient>=0.10" "nbformat>=5.9" "ipykernel>=6.17" && rm -rf /course

# No one is root in the grader's containers (it starts them with --user 65534:65534, every capability dropped).
USER 65534:65534
WORKDIR /tmp
