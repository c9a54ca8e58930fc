"""`shopbench distill export-onnx`: a model directory's onnxruntime-genai folder, which the
local-weights policy plays with ``engine: onnxruntime-genai``."""

from __future__ import annotations

from pathlib import Path

import typer

from shopbench.agents.local.ort_engine import Precision


def register_onnx(distill_app: typer.Typer) -> None:
    """Add `export-onnx` to the distill group."""

    @distill_app.command("export-onnx")
    def export_onnx_command(
        model: Path = typer.Option(..., "--model", help="model directory (hf:PATH's PATH)"),
        out: Path | None = typer.Option(
            None, "--out", help="folder to write (default: the model directory's onnx folder, "
            "where engine onnxruntime-genai looks; onnx-int8 or onnx-int4 beside it when "
            "quantized)",
        ),  # fmt: skip
        precision: Precision = typer.Option(
            "fp32", "--precision", help="fp32 (the same greedy tokens as transformers), or "
            "every linear layer's weights in 8 or 4 bits (compare its outcomes with "
            "`shopbench bench hf-engines --setting onnx:2 --setting onnx-int4:2` first)",
        ),  # fmt: skip
    ) -> None:
        """Export a model directory to onnxruntime-genai (CPU), offline."""
        from shopbench.agents.local.ort_engine import export_onnx

        folder = export_onnx(model, out, precision)  # a LocalModelError is the CLI's one-line error
        typer.echo(f"wrote the onnxruntime-genai model to {folder}")
