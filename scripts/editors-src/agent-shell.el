;;; agent-shell.el --- headless check of agent-shell against Spindle -*- lexical-binding: t; -*-

;; Run by scripts/editors:
;;   emacs -Q --batch -L SHELL_MAKER -L ACP -L AGENT_SHELL -l agent-shell.el
;; in the scratch workspace, with SPINDLE_BIN, EDITORS_SCENARIO and
;; EDITORS_OUT set.  Writes "PASS name" / "FAIL name: why" lines and then
;; the shell buffer to EDITORS_OUT, and exits.

(require 'agent-shell)

(defun editors-env (name)
  (let ((v (getenv name)))
    (if (and v (not (string-empty-p v))) v
      (message "agent-shell.el: %s is not set" name)
      (kill-emacs 2))))

(defvar editors-spindle (editors-env "SPINDLE_BIN"))
(defvar editors-scenario (editors-env "EDITORS_SCENARIO"))
(defvar editors-out (editors-env "EDITORS_OUT"))
(defvar editors-db (editors-env "EDITORS_DB"))

;; The set-up of docs/editors.md, with the scripted provider as the model.
(defun my/spindle-agent-config ()
  (agent-shell-make-agent-config
   :identifier 'spindle
   :mode-line-name "Spindle"
   :buffer-name "Spindle"
   :shell-prompt "Spindle> "
   :shell-prompt-regexp "Spindle> "
   :client-maker
   (lambda (buffer)
     (acp-make-client
      :command editors-spindle
      :command-params (list "acp" "--script" editors-scenario "--db" editors-db "--permissions" "ask")
      :context-buffer buffer))))

(add-to-list 'agent-shell-agent-configs #'my/spindle-agent-config t)

(when (getenv "EDITORS_DEBUG") (setq acp-logging-enabled t))

(defvar editors-results nil)
(defun editors-check (name ok &optional why)
  (push (if ok (format "PASS %s" name)
          (format "FAIL %s: %s" name (replace-regexp-in-string "\n" "\\\\n" (or why ""))))
        editors-results))

(defun editors-wait (pred seconds)
  "Run the event loop until PRED holds or SECONDS pass; return PRED's value."
  (let ((end (+ (float-time) seconds)) v)
    (while (and (not (setq v (funcall pred))) (< (float-time) end))
      (accept-process-output nil 0.05))
    v))

(defun editors-text (buffer)
  (with-current-buffer buffer (buffer-substring-no-properties (point-min) (point-max))))

(defun editors-read (path)
  (when (file-exists-p path)
    (with-temp-buffer (insert-file-contents path) (buffer-string))))

(defvar editors-asked 0)

(defun editors-answer (buffer key)
  "Wait for a permission dialog in BUFFER and press KEY on it.
KEY \"RET\" presses the dialog's second button, which is Reject."
  (with-current-buffer buffer
    (when (editors-wait (lambda () (agent-shell-jump-to-latest-permission-button-row)) 20)
      (setq editors-asked (1+ editors-asked))
      (when (equal key "RET") (agent-shell-next-permission-button))
      (call-interactively (key-binding (kbd key))))))

(defun editors-prompt (buffer text &optional key)
  "Send TEXT from BUFFER, answer a permission dialog with KEY, wait for the turn."
  (agent-shell-insert :text text :submit t :shell-buffer buffer)
  (when key (editors-answer buffer key))
  (editors-wait (lambda () (with-current-buffer buffer (not (shell-maker-busy)))) 30)
  ;; Let the last updates land.
  (accept-process-output nil 0.3))

(defun editors-session-id (buffer)
  (with-current-buffer buffer (map-nested-elt agent-shell--state '(:session :id))))

(defun editors-start ()
  "Start a shell and wait for its session: a prompt sent before is refused."
  (let ((buffer (agent-shell-start :config (my/spindle-agent-config))))
    (editors-wait (lambda () (and (editors-session-id buffer)
                                  (with-current-buffer buffer (not (shell-maker-busy)))))
                  20)
    buffer))

(defun editors-run ()
  (let ((buffer (editors-start)))
    (editors-check "open_shell" (editors-session-id buffer) "no ACP session")
    (editors-prompt buffer "editors: stream")
    (editors-check "stream" (string-search "Streaming works: alpha beta gamma delta." (editors-text buffer))
                   "no streamed answer")

    (editors-prompt buffer "editors: write" "y")
    (editors-check "write_allowed"
                   (and (= editors-asked 1)
                        (equal (editors-read "hello.txt") "hello from spindle\n")
                        (string-search "The write is done." (editors-text buffer)))
                   (format "asked=%d hello.txt=%S" editors-asked (editors-read "hello.txt")))

    ;; Always allow (allow_always) covers this file for the session.
    (delete-file "hello.txt")
    (editors-prompt buffer "editors: write" "!")
    (let ((asked editors-asked))
      (delete-file "hello.txt")
      (editors-prompt buffer "editors: write")
      (editors-check "always_allow"
                     (and (= asked 2) (= editors-asked 2)
                          (equal (editors-read "hello.txt") "hello from spindle\n"))
                     (format "asked=%d then %d" asked editors-asked)))

    ;; Spindle's own slash command: after it no edit in the workspace asks.
    (editors-prompt buffer "/allow edits")
    (editors-prompt buffer "editors: second write")
    (editors-check "allow_edits_command"
                   (and (= editors-asked 2) (equal (editors-read "second.txt") "second\n"))
                   (format "asked=%d" editors-asked))

    ;; The Reject button answers reject_once (and then cancels the turn).
    (editors-prompt buffer "editors: command" "RET")
    (editors-check "command_rejected"
                   (and (= editors-asked 3) (not (file-exists-p "rejected.txt")))
                   (format "asked=%d rejected.txt=%s" editors-asked (file-exists-p "rejected.txt")))

    ;; C-c C-c (shown as the Reject key) answers `cancelled' and cancels the turn.
    (editors-prompt buffer "editors: command" "C-c C-c")
    (editors-check "command_cancelled"
                   (and (= editors-asked 4) (not (file-exists-p "rejected.txt")))
                   (format "asked=%d rejected.txt=%s" editors-asked (file-exists-p "rejected.txt")))

    (editors-prompt buffer "editors: plan")
    (editors-check "plan" (string-search "Mark them reviewed" (editors-text buffer)) "no plan entries")

    ;; A new shell with the `latest' strategy resumes the session in a new
    ;; Spindle process (the default, `prompt', asks which session to take).
    (let ((id (editors-session-id buffer))
          (kill-buffer-query-functions nil))
      (kill-buffer buffer)
      (setq buffer (let ((agent-shell-session-strategy 'latest)) (editors-start)))
      (editors-prompt buffer "editors: stream")
      (editors-check "resume"
                     (and id (equal (editors-session-id buffer) id)
                          (string-search "Streaming works" (editors-text buffer)))
                     (format "session %S, then %S" id (editors-session-id buffer))))
    buffer))

(let ((buffer nil))
  (condition-case err
      (setq buffer (editors-run))
    (error (editors-check "driver" nil (error-message-string err))))
  (with-temp-file editors-out
    (insert (mapconcat #'identity (reverse editors-results) "\n") "\n----- shell buffer -----\n")
    (when (buffer-live-p buffer) (insert (editors-text buffer))))
  (when (getenv "EDITORS_DEBUG")
    (with-temp-file (concat editors-out ".acp")
      (dolist (b (buffer-list))
        (when (string-prefix-p "*acp" (buffer-name b))
          (insert "===== " (buffer-name b) "\n" (editors-text b) "\n")))))
  (kill-emacs 0))
