"""The language server behind `todoflow lsp` (needs the `lsp` extra: pygls).

The top layer: it reads sources through `dsl`, checks them through
`compiler.analysis.analyze` (what `todoflow check` runs), and speaks LSP through pygls.
`positions` converts spans to LSP ranges; `outline` reads names and blocks even from a
file that does not parse; `diagnostics`, `hover`, `navigation`, `completion`, `actions`,
`symbols` and `semantic` (semantic tokens) are the features; `server` wires them to the
protocol.
"""
