"""The outline an editor shows (workflow -> steps -> routes, tasks) and the ranges it folds."""

from __future__ import annotations

from lsprotocol import types

from todoflow.dsl.spans import Span

from .outline import Block, Outline
from .positions import LineIndex

_KINDS = {
    "workflow": types.SymbolKind.Module,
    "step": types.SymbolKind.Function,
    "route": types.SymbolKind.Interface,
    "tasks": types.SymbolKind.Array,
    "task": types.SymbolKind.Event,
}


def document_symbols(outline: Outline, lines: LineIndex) -> list[types.DocumentSymbol]:
    return [_symbol(block, lines) for block in outline.blocks]


def _symbol(block: Block, lines: LineIndex) -> types.DocumentSymbol:
    return types.DocumentSymbol(
        name=block.name,
        detail=block.detail or None,
        kind=_KINDS[block.kind],
        range=lines.range(block.span),
        selection_range=lines.range(block.selection),
        children=[_symbol(child, lines) for child in block.children] or None,
    )


def folding_ranges(outline: Outline) -> list[types.FoldingRange]:
    """Every block and block string over several lines (LSP lines are 0-based)."""
    spans = [*_block_spans(outline.blocks), *outline.multiline_texts]
    return [
        types.FoldingRange(start_line=span.line - 1, end_line=span.end_line - 1)
        for span in sorted(spans, key=lambda s: (s.line, s.end_line))
        if span.end_line > span.line
    ]


def _block_spans(blocks: tuple[Block, ...]) -> list[Span]:
    spans: list[Span] = []
    for block in blocks:
        if block.kind != "task":
            spans.append(block.span)
        spans += _block_spans(block.children)
    return spans
