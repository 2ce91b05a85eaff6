-- Headless check of CodeCompanion.nvim against Spindle (run by scripts/editors):
--   nvim --headless -u codecompanion.lua
-- in the scratch workspace, with CODECOMPANION_DIR, PLENARY_DIR, SPINDLE_BIN,
-- EDITORS_SCENARIO and EDITORS_OUT set. Writes "PASS name" / "FAIL name: why"
-- lines and then the chat buffer to EDITORS_OUT, and quits.
local env = function(name)
  local v = os.getenv(name)
  if not v or v == "" then
    io.stderr:write("codecompanion.lua: " .. name .. " is not set\n")
    vim.cmd("cquit 2")
  end
  return v
end
vim.opt.runtimepath:prepend(env("PLENARY_DIR"))
vim.opt.runtimepath:prepend(env("CODECOMPANION_DIR"))
local spindle, scenario, out = env("SPINDLE_BIN"), env("EDITORS_SCENARIO"), env("EDITORS_OUT")

-- The set-up of docs/editors.md, with the scripted provider as the model.
require("codecompanion").setup({
  adapters = {
    acp = {
      spindle = function()
        return require("codecompanion.adapters").extend("opencode", {
          name = "spindle",
          formatted_name = "Spindle",
          commands = {
            default = { spindle, "acp", "--script", scenario, "--permissions", "ask" },
          },
        })
      end,
    },
  },
  interactions = { chat = { adapter = "spindle" } },
  opts = { log_level = os.getenv("EDITORS_DEBUG") and "TRACE" or "WARN" },
})

local results = {}
local function check(name, ok, why)
  table.insert(results, (ok and "PASS " or "FAIL ") .. name .. (ok and "" or (": " .. (why or ""))))
end

local approvals = {} -- the answer to give to the next permission requests, in order
local asked = 0
vim.api.nvim_create_autocmd("User", {
  pattern = "CodeCompanionToolApprovalRequested",
  callback = function(ev)
    asked = asked + 1
    local key = table.remove(approvals, 1) or "g3"
    vim.schedule(function()
      local win = vim.fn.bufwinid(ev.data.bufnr)
      if win ~= -1 then
        vim.api.nvim_set_current_win(win)
      end
      vim.api.nvim_buf_call(ev.data.bufnr, function()
        vim.cmd("normal " .. key)
      end)
    end)
  end,
})
local done = 0
vim.api.nvim_create_autocmd("User", {
  pattern = "CodeCompanionChatDone",
  callback = function()
    done = done + 1
  end,
})

local function chat_text(chat)
  return table.concat(vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false), "\n")
end

local function read(path)
  local f = io.open(path)
  if not f then
    return nil
  end
  local content = f:read("a")
  f:close()
  return content
end

local function prompt(chat, text)
  local want = done + 1
  chat:add_buf_message({ role = "user", content = text })
  chat:submit()
  return vim.wait(30000, function()
    return done >= want
  end, 50)
end

local function run()
  local chat = require("codecompanion").chat()
  if not chat then
    check("open_chat", false, "no chat")
    return
  end
  -- Wait for the connection the chat opens in the background: a prompt sent
  -- before it is up makes CodeCompanion start a second agent process.
  local up = vim.wait(20000, function()
    return chat.acp_connection ~= nil and chat.acp_connection.session_id ~= nil
  end, 50)
  check("open_chat", up, "no ACP session")

  local ok = prompt(chat, "editors: stream")
  local text = chat_text(chat)
  check("stream", ok and text:find("Streaming works: alpha beta gamma delta.", 1, true) ~= nil, "no streamed answer")

  approvals = { "g2" } -- Accept: allow_once
  ok = prompt(chat, "editors: write")
  text = chat_text(chat)
  check(
    "write_allowed",
    ok and asked == 1 and read("hello.txt") == "hello from spindle\n" and text:find("The write is done.", 1, true) ~= nil,
    string.format("asked=%d hello.txt=%s", asked, vim.inspect(read("hello.txt")))
  )

  -- Always accept (allow_always) covers this file for the session: the
  -- third write does not ask.
  os.remove("hello.txt")
  approvals = { "g1" }
  local ok2 = prompt(chat, "editors: write")
  local asked2 = asked
  os.remove("hello.txt")
  ok = prompt(chat, "editors: write")
  check(
    "always_allow",
    ok2 and ok and asked2 == 2 and asked == 2 and read("hello.txt") == "hello from spindle\n",
    string.format("asked=%d then %d", asked2, asked)
  )

  -- Spindle's own slash commands are typed with a backslash in CodeCompanion:
  -- after "/allow edits" no edit in the workspace asks.
  ok = prompt(chat, "\\allow edits")
  local ok3 = prompt(chat, "editors: second write")
  check("allow_edits_command", ok and ok3 and asked == 2 and read("second.txt") == "second\n", string.format("asked=%d", asked))

  approvals = { "g3" } -- Reject: reject_once
  ok = prompt(chat, "editors: command")
  text = chat_text(chat)
  -- A rejection ends Spindle's turn with a line saying what was declined.
  check(
    "command_rejected",
    ok and asked == 3 and vim.fn.filereadable("rejected.txt") == 0 and text:find("You declined", 1, true) ~= nil,
    string.format("asked=%d rejected.txt=%d", asked, vim.fn.filereadable("rejected.txt"))
  )

  ok = prompt(chat, "editors: plan")
  text = chat_text(chat)
  -- CodeCompanion shows no ACP plan; the todo_write call shows as "Think: Update plan".
  check("plan", ok and text:find("Update plan", 1, true) ~= nil and text:find("two steps", 1, true) ~= nil, "no plan step")
end

vim.schedule(function()
  local ok, err = pcall(run)
  if not ok then
    check("driver", false, tostring(err))
  end
  local chat = require("codecompanion").last_chat()
  local lines = vim.list_extend({}, results)
  table.insert(lines, "----- chat buffer -----")
  if chat then
    vim.list_extend(lines, vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false))
  end
  vim.fn.writefile(lines, out)
  if os.getenv("EDITORS_DEBUG") then -- keep CodeCompanion's RPC logs (in Neovim's temporary folder)
    vim.fn.system({ "cp", "-r", vim.fn.fnamemodify(vim.fn.tempname(), ":h"), out .. ".rpc" })
  end
  vim.cmd("qa!")
end)
