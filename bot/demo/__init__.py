"""The embedded demo: a local Synapse, a bot, a human, a scripted agent."""
