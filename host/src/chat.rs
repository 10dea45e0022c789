//! Chat runs (draft §7): a conversation with a model about what the reviewer is looking at,
//! streamed as AgentEvents — `run.created`, `stage.changed` (`model`, the chat's one stage),
//! `context.added` (the model, the selection), `tool.started` /
//! `tool.completed` when tools are enabled, `text.delta`, and `run.completed` with `usage`.
//!
//! Decisions:
//! - **The selection travels in the first user message** as a fenced quote with its path and
//!   lines; the client's own `system` messages are appended to the gateway's system prompt.
//! - **Tools** (`toolsEnabled: true`) are the read-only repository tools on the repository the
//!   selection's GitLab project maps to, at the chat's `ref` (the selection's `headSha` when
//!   given, else the mapping's `defaultRef`); the loop is bounded by `maxToolCalls`
//!   ([`crate::conversation`]).
//! - **A broken stream fails the run** (`provider.unavailable`, retryable) after the turn
//!   retries of [`crate::conversation`]; a chat is not resumable: send it again.

use std::sync::Arc;
use std::time::Instant;

use crate::conversation::{
    self, Budget, Conversation, End, MIN_OUTPUT_TOKENS, Spent, ToolHost, specs_tokens,
};
use crate::error::{GatewayError, Hint, Surface, codes};
use crate::protocol::{
    AgentEvent, ChatMessage, ChatRole, ContextAdded, ContextItem, FileContext, RunCompleted,
    RunCreated, RunKind, SelectionContext, Warning,
};
use crate::providers::{
    Message, Part, Provider, Role, ToolCall, ToolResult, ToolSpec, estimate_tokens,
};
use crate::review::{Emitter, RunControl};
use crate::tools::{Registry, ToolContext};

/// What a chat run needs.
#[derive(Clone)]
pub struct ChatOptions {
    /// The provider client.
    pub provider: Arc<dyn Provider>,
    /// The model name.
    pub model: String,
    /// The conversation from the client, oldest first (at least one message).
    pub messages: Vec<ChatMessage>,
    /// What the user selected, if anything.
    pub selection: Option<SelectionContext>,
    /// The repository the tools read when `toolsEnabled`; `None`: no tools offered.
    pub tools: Option<ChatRepository>,
    /// Budgets.
    pub budget: Budget,
    /// Runs the provider's streams (see [`crate::review::model::ModelReview::runtime`]).
    pub runtime: tokio::runtime::Handle,
    /// The client's `requestId`.
    pub request_id: Option<String>,
    /// Who started the chat: its messages name flags or request fields.
    pub surface: Surface,
}

impl std::fmt::Debug for ChatOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatOptions")
            .field("provider", &self.provider.id())
            .field("model", &self.model)
            .field("messages", &self.messages.len())
            .field("tools", &self.tools.is_some())
            .finish_non_exhaustive()
    }
}

/// The repository a chat's tools read: a mapped repository at the chat's revision.
#[derive(Debug, Clone)]
pub struct ChatRepository {
    /// The mapping's local path (never shown to the model or in events, DESIGN §6).
    pub path: std::path::PathBuf,
    /// The revision: a commit SHA, branch or tag.
    pub rev: String,
    /// The daemon's shared symbol index.
    pub symbols: Arc<crate::tools::SymbolIndex>,
}

/// The result of a chat run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatOutcome {
    /// The model's whole answer.
    pub text: String,
    /// Tool calls and tokens used.
    pub spent: Spent,
}

/// Run a chat under `control`, sending every AgentEvent to `sink`. The stream starts with
/// `run.created` (when `control.announce`) and ends with one of `run.completed`,
/// `run.failed` or `run.cancelled`.
///
/// # Errors
/// The provider's errors (`provider.*`), `run.cancelled`.
pub fn run_with(
    options: &ChatOptions,
    control: &RunControl,
    sink: &mut dyn FnMut(&AgentEvent),
) -> Result<ChatOutcome, GatewayError> {
    let started = Instant::now();
    let mut emitter = Emitter::continuing(control.run_id.clone(), control.last_seq, sink)
        .speaking_to(options.surface);
    if control.announce {
        emitter.emit(RunCreated {
            request_id: options.request_id.clone(),
            kind: Some(RunKind::Chat),
            from_cache: None,
        });
    }
    // One stage, so the run reads `running` while the model answers.
    emitter.emit(crate::protocol::StageChanged {
        stage: crate::protocol::Stage::Model,
        message: None,
        files: None,
    });
    // The tools' schemas take thousands of tokens: a small context window keeps them for the
    // conversation instead (as a review does).
    let registry = Registry::builtin();
    let mut offer_tools = options.tools.is_some();
    if offer_tools {
        let window = options.budget.max_context_tokens;
        let need = specs_tokens(&crate::conversation::repository_tool_specs(&registry))
            + options
                .messages
                .iter()
                .map(|m| estimate_tokens(&m.content))
                .sum::<u64>()
            + options
                .selection
                .as_ref()
                .map_or(0, |s| estimate_tokens(&s.text))
            + 4 * MIN_OUTPUT_TOKENS;
        if need > window {
            offer_tools = false;
            emitter.emit(Warning {
                code: "model.tools_omitted".into(),
                message: format!(
                    "the model's context of {window} tokens leaves no room for the repository \
                     tools (~{need} tokens with them), so the model answers without them"
                ),
                path: None,
                remediation: Some(
                    crate::conversation::CONTEXT_REMEDIATION
                        .to(options.surface)
                        .into(),
                ),
            });
        }
    }
    emitter.emit(crate::conversation::model_context(
        options.provider.as_ref(),
        &options.model,
        &options.budget,
        offer_tools,
    ));
    if let Some(selection) = &options.selection {
        emitter.emit(ContextAdded {
            context: ContextItem::File(FileContext {
                path: selection.file_path.clone(),
                start_line: Some(selection.start_line),
                end_line: Some(selection.end_line),
            }),
        });
    }
    let mut system = String::from(
        "You are a senior engineer helping a code reviewer on a GitLab merge request. Answer \
         precisely and briefly, in the language of the question; quote code with its path and \
         line numbers.",
    );
    if offer_tools {
        system.push_str(
            " You may read the repository with the tools (file_read, code_search, \
             symbol_search, file_search, git_history, file_read_diff) before you answer; calls \
             are budgeted.",
        );
    }
    for m in options
        .messages
        .iter()
        .filter(|m| m.role == ChatRole::System)
    {
        system.push_str("\n\n");
        system.push_str(&m.content);
    }
    let mut messages: Vec<Message> = Vec::new();
    for (i, m) in options
        .messages
        .iter()
        .filter(|m| m.role != ChatRole::System)
        .enumerate()
    {
        let mut text = m.content.clone();
        if i == 0
            && let Some(selection) = &options.selection
        {
            text = format!(
                "The reviewer selected {}:{}-{}:\n```\n{}\n```\n\n{text}",
                selection.file_path, selection.start_line, selection.end_line, selection.text
            );
        }
        messages.push(match m.role {
            ChatRole::Assistant => Message::assistant(text),
            _ => Message::user(text),
        });
    }
    let mut conversation = Conversation {
        provider: options.provider.as_ref(),
        model: &options.model,
        system: &system,
        messages,
    };
    let ctx = match options.tools.as_ref().filter(|_| offer_tools) {
        None => None,
        Some(repo) => match ToolContext::open(&repo.path, Some(&repo.rev)) {
            Ok(ctx) => Some(ctx.with_symbol_index(repo.symbols.clone())),
            Err(error) => {
                emitter.emit(crate::protocol::RunFailed {
                    error: (&error).into(),
                    reviewed_files: None,
                    skipped_files: None,
                });
                return Err(error);
            }
        },
    };
    let mut host = ChatTools {
        ctx: ctx.as_ref(),
        registry,
    };
    let mut spent = Spent::default();
    let ended = options.runtime.block_on(conversation::converse(
        &mut conversation,
        &mut host,
        &options.budget,
        &mut spent,
        &control.cancel_token,
        &mut emitter,
    ));
    let cancelled = matches!(ended, Ok(End::Cancelled)) || control.cancel_token.is_cancelled();
    if cancelled {
        emitter.emit(crate::protocol::RunCancelled {
            reason: Some(control.cancel_reason()),
        });
        return Err(GatewayError::new(
            codes::RUN_CANCELLED,
            format!("run {} was cancelled", control.run_id),
            "Send the chat again.",
        ));
    }
    let ended = match ended {
        // A budget that ran out before any answer leaves the user nothing: a failure.
        Ok(End::BudgetExhausted(which)) if answer_text(&conversation.messages).is_empty() => {
            let (limit, remediation) = if which == "maxContextTokens" {
                (
                    format!("a context of {} tokens", options.budget.max_context_tokens),
                    Hint {
                        command_line: "Ask about fewer lines (--lines), or raise the provider's \
                             context_window in config.toml (and the model server's own).",
                        request: "Ask about a shorter selection, or raise the provider's \
                             context_window in the gateway's config.toml (and the model server's \
                             own).",
                    }
                    .to(options.surface),
                )
            } else {
                (
                    format!("up to {} tool calls", options.budget.max_tool_calls),
                    crate::conversation::BUDGET_REMEDIATION.to(options.surface),
                )
            };
            Err(GatewayError::new(
                codes::BUDGET_EXHAUSTED,
                format!("the chat's budget `{which}` ({limit}) ran out before the model answered"),
                remediation,
            ))
        }
        other => other,
    };
    let text = match ended {
        Ok(End::Done { text, .. }) => text,
        Ok(_) => answer_text(&conversation.messages),
        Err(error) => {
            emitter.emit(crate::protocol::RunFailed {
                error: (&error).into(),
                reviewed_files: None,
                skipped_files: None,
            });
            return Err(error);
        }
    };
    emitter.emit(RunCompleted {
        usage: Some(spent.usage),
        duration_ms: Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
        ..RunCompleted::default()
    });
    Ok(ChatOutcome { text, spent })
}

/// The assistant text of a conversation that ended early.
fn answer_text(messages: &[Message]) -> String {
    messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

struct ChatTools<'a> {
    ctx: Option<&'a ToolContext>,
    registry: Registry,
}

impl ToolHost for ChatTools<'_> {
    fn specs(&self) -> Vec<ToolSpec> {
        if self.ctx.is_none() {
            return Vec::new();
        }
        crate::conversation::repository_tool_specs(&self.registry)
    }

    fn counts_against_budget(&self, _name: &str) -> bool {
        true
    }

    fn call(&mut self, call: &ToolCall, emitter: &mut Emitter<'_>) -> ToolResult {
        crate::conversation::call_repository_tool(self.ctx, &self.registry, call, emitter)
    }
}
