// The VS Code client of `todoflow lsp`: starts the server of the configured Python
// environment (`todoflow.server.path`, default `todoflow` on PATH) over stdio, for
// .todoflow files and the prompt templates (*.j2) they read. Plain JavaScript, no build.
"use strict";

const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function serverCommand() {
  const configured = vscode.workspace.getConfiguration("todoflow").get("server.path") || "todoflow";
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? "";
  return configured.replace("${workspaceFolder}", folder);
}

async function start() {
  const command = serverCommand();
  client = new LanguageClient(
    "todoflow",
    "todoflow",
    { command, args: ["lsp"] },
    { documentSelector: [{ language: "todoflow" }, { pattern: "**/*.j2" }] },
  );
  try {
    await client.start();
  } catch (error) {
    client = undefined;
    vscode.window.showErrorMessage(
      `todoflow: cannot start \`${command} lsp\` (${error.message}). ` +
        "Install it with `pip install 'todoflow[lsp]'`, or set `todoflow.server.path` " +
        "to the `todoflow` of your environment.",
    );
  }
}

async function restart() {
  if (client) {
    await client.stop();
  }
  await start();
}

async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand("todoflow.restartServer", restart),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("todoflow.server.path")) {
        return restart();
      }
      return undefined;
    }),
  );
  await start();
}

async function deactivate() {
  if (client) {
    await client.stop();
  }
}

module.exports = { activate, deactivate };
