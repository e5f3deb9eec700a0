package io.lockagent;

/** SETTINGS: the agent's cluster settings differ from those its masters record; it grants nothing until they agree. */
public class SettingsException extends LockAgentException {
    SettingsException(String message) {
        super("SETTINGS", message);
    }
}
