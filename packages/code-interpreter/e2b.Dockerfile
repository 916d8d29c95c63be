# The code-interpreter-v1 template, the default of the @e2b/code-interpreter
# SDKs: Paddock's base with Debian's Jupyter, pandas, numpy and matplotlib,
# and this package's server on port 49999.
#
#   npm run paddock -- template build packages/code-interpreter --name code-interpreter-v1 --memory 2048
FROM e2bdev/base
# python3-munkres stands for python3-scipy in fonttools' dependencies (either
# will do); scipy would bring pythran, boost and the Python headers with it.
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3-ipykernel python3-jupyter-client python3-pandas python3-numpy python3-matplotlib node-typescript \
      python3-munkres \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY server /opt/paddock/code-interpreter
RUN python3 -m compileall -q /opt/paddock/code-interpreter
USER user
WORKDIR /home/user
# matplotlib builds its font cache on first import: done here, not in the first cell.
RUN python3 -c "import matplotlib.pyplot"
ENV PYDEVD_DISABLE_FILE_VALIDATION=1
CMD cd /opt/paddock/code-interpreter && exec python3 -m paddock_code_interpreter --cwd /home/user
HEALTHCHECK CMD curl -sf http://127.0.0.1:49999/health
