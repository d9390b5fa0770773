"""Actions: what a job does on a host (command, shell, script, copy, firmware, key-rollover,
ansible, plugins), their declared parameters, and secret references.

See docs/actions.md for each action and for writing a plugin.
"""

from scheduler.redact import RedactingFilter, Redactor
from tasks.base import Action, ActionContext, ActionResult, BaseAction, Step, StepFailed, Steps
from tasks.params import (
                          Argv,
                          Boolean,
                          Choice,
                          Duration,
                          Integer,
                          KeyValues,
                          LocalPath,
                          Mode,
                          Owner,
                          Param,
                          ParamType,
                          RemotePath,
                          Sha256,
                          Text,
                          validate_params,
)
from tasks.registry import GROUP, describe_action, get_action, list_actions, reload
from tasks.secrets import SecretError, SecretRef, resolve

__all__ = [
    "Action", "ActionContext", "ActionResult", "Argv", "BaseAction", "Boolean", "Choice",
    "Duration", "GROUP", "Integer", "KeyValues", "LocalPath", "Mode", "Owner", "Param",
    "ParamType", "RedactingFilter", "Redactor", "RemotePath", "SecretError", "SecretRef", "Sha256",
    "Step", "StepFailed", "Steps", "Text", "describe_action", "get_action", "list_actions", "reload",
    "resolve", "validate_params",
]
