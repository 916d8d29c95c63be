# Run by the Python kernel at its start (IPKernelApp.exec_files), in the
# user's namespace: everything is done inside a function that is deleted
# afterwards, so the user's names stay as a fresh kernel has them.
def _paddock_startup():
    import importlib.util
    import json
    import os
    import sys

    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    here = os.path.dirname(os.path.abspath(__file__))  # noqa: F821 (IPython sets __file__ while it runs this file)
    spec = importlib.util.spec_from_file_location("_paddock_charts", os.path.join(here, "charts.py"))
    charts = importlib.util.module_from_spec(spec)
    sys.modules["_paddock_charts"] = charts
    spec.loader.exec_module(charts)

    class ChartFormatter(BaseFormatter):
        """A matplotlib figure's data as the SDKs' chart (`e2b/chart`)."""

        format_type = Unicode("e2b/chart")
        print_method = ObjectName("_repr_e2b_chart_")
        _return_type = (dict,)

        def __call__(self, obj):
            # matplotlib is imported by the user's code, not here: the check waits for it.
            figure = sys.modules.get("matplotlib.figure")
            if figure is not None and isinstance(obj, figure.Figure):
                try:
                    return charts.figure_to_chart(obj)
                except Exception:  # a chart the extraction does not know is shown as PNG only
                    return None
            return super().__call__(obj)

    class DataFormatter(BaseFormatter):
        """A pandas DataFrame's columns as lists (`e2b/data`)."""

        format_type = Unicode("e2b/data")
        print_method = ObjectName("_repr_e2b_data_")
        _return_type = (dict,)

        def __call__(self, obj):
            pandas = sys.modules.get("pandas")
            if pandas is not None and isinstance(obj, pandas.DataFrame):
                try:
                    columns = obj.to_dict(orient="list")
                    return json.loads(json.dumps({str(k): v for k, v in columns.items()}, default=_plain))
                except Exception:
                    return None
            return super().__call__(obj)

    def _plain(value):
        if hasattr(value, "isoformat"):
            return value.isoformat()
        if hasattr(value, "item"):
            return value.item()
        return str(value)

    shell = get_ipython()
    formatters = shell.display_formatter.formatters
    formatters["e2b/chart"] = ChartFormatter(parent=shell.display_formatter)
    formatters["e2b/data"] = DataFormatter(parent=shell.display_formatter)
    # Lists and dicts are shown as JSON too, when they are plain data.
    json_formatter = formatters["application/json"]

    def as_json(obj):
        try:
            return json.loads(json.dumps(obj, default=_plain))
        except (TypeError, ValueError):
            return None

    json_formatter.for_type(list, as_json)
    json_formatter.for_type(dict, as_json)

    # ipykernel flushes stdout and stderr about six times in each execution
    # (around the result, before the reply, before the idle status), and each
    # flush waits for its IOPub thread to run even when nothing was written:
    # on a busy machine that is most of the time between a cell's result and
    # its end. A flush with nothing to send returns at once here; one with
    # output (or output a subprocess sent) goes as before, and every IOPub
    # message keeps its order, the idle status after all output.
    from ipykernel.iostream import OutStream

    full_flush = OutStream.flush

    def flush(self):
        buffer = getattr(self, "_buffer", None)
        idle = (
            buffer is not None
            and self.echo is None
            and not getattr(self, "_flush_pending", True)
            and not getattr(self, "_subprocess_flush_pending", True)
            and buffer.tell() == 0
        )
        if not idle:
            full_flush(self)

    OutStream.flush = flush


_paddock_startup()
del _paddock_startup
