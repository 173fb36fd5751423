"""The MCP client side (issue 53): the servers the operator's file names, connected once per
process with the official `mcp` SDK, their tools listed and called."""
