"""blackboard-mcp: a shared blackboard of small versioned notes for fleets of LLM agents."""

__version__ = "0.1.0"
