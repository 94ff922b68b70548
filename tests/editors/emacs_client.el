;;; emacs_client.el --- drive the real server through eglot and editors/emacs  -*- lexical-binding: t; -*-

;; emacs --batch -Q -l emacs_client.el, with the environment:
;;   TORCHSCAN_PLUGIN_DIR  editors/emacs      TORCHSCAN_PYTHON  interpreter with the server
;;   TORCHSCAN_WORKSPACE   has model.py and broken.py
;;   TORCHSCAN_OUT         JSON file written at the end
;;   TORCHSCAN_MODE        "session" (analyse, collect hover and diagnostics) or "setup-only"
;; Writes what Emacs received: the hover text eglot shows, flymake's diagnostics, the
;; torchscan/status states, the root eglot gave the server and any error message.

(require 'json)
(require 'cl-lib)
(add-to-list 'load-path (getenv "TORCHSCAN_PLUGIN_DIR"))
(require 'torchscan-eglot)

(setq torchscan-python (getenv "TORCHSCAN_PYTHON")
      torchscan-allow-execution t
      eglot-sync-connect t)
(torchscan-eglot-setup)

(defvar client-timeout 120)
(defvar client-result (list (cons 'messages nil)))
(defvar client-workspace (file-name-as-directory (getenv "TORCHSCAN_WORKSPACE")))

(defun client-wait (predicate)
  "Process server output until PREDICATE holds or the timeout passes; return its value."
  (let ((deadline (+ (float-time) client-timeout)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (funcall predicate)))

(defun client-state (buffer)
  (with-current-buffer buffer (torchscan-status)))

(defun client-settled-p (buffer)
  (member (client-state buffer) '("done" "failed")))

(defun client-diagnostics (buffer expected)
  "Flymake's diagnostics of BUFFER as (line type message), lines 0-based.
When EXPECTED, wait for at least one; otherwise take what flymake has now."
  (with-current-buffer buffer
    (flymake-start)
    (when expected
      (client-wait (lambda () (flymake-diagnostics))))
    (mapcar (lambda (diagnostic)
              (list (cons 'line (1- (line-number-at-pos (flymake-diagnostic-beg diagnostic))))
                    (cons 'type (symbol-name (flymake-diagnostic-type diagnostic)))
                    (cons 'message (flymake-diagnostic-text diagnostic))))
            (flymake-diagnostics))))

(defun client-finish ()
  (with-temp-file (getenv "TORCHSCAN_OUT")
    (insert (json-encode client-result)))
  (dolist (server (hash-table-values eglot--servers-by-project))
    (ignore-errors (eglot-shutdown (car server))))
  (kill-emacs 0))

(defun client-visit (file)
  "Visit FILE in the workspace; eglot manages it once a server runs for the project."
  (find-file-noselect (expand-file-name file client-workspace)))

(defun client-start (buffer)
  "Connect eglot from BUFFER as M-x eglot does; record a failure's message."
  (with-current-buffer buffer
    (condition-case err
        (apply #'eglot (eglot--guess-contact))
      (error (push (error-message-string err) (alist-get 'messages client-result)))))
  buffer)

(let ((model (client-start (client-visit "model.py"))))
  (unless (equal (getenv "TORCHSCAN_MODE") "setup-only")
    (client-wait (lambda () (client-settled-p model)))
    (let ((broken (client-visit "broken.py")))
      (client-wait (lambda () (client-settled-p broken)))
      (push (cons 'states (list (cons 'model (client-state model)) (cons 'broken (client-state broken))))
            client-result)
      (push (cons 'diagnostics (list (cons 'broken (client-diagnostics broken t))
                                     (cons 'model (client-diagnostics model nil))))
            client-result))
    (with-current-buffer model
      (push (cons 'project_root (project-root (eglot--project (eglot--current-server-or-lose)))) client-result)
      (goto-char (point-min))
      (search-forward "nn.Conv2d(")
      (let* ((hover (jsonrpc-request (eglot--current-server-or-lose) :textDocument/hover
                                     (eglot--TextDocumentPositionParams)))
             (contents (plist-get hover :contents)))
        (push (cons 'hover_line (1- (line-number-at-pos))) client-result)
        (push (cons 'hover (and contents (eglot--hover-info contents (plist-get hover :range))))
              client-result)))))
(client-finish)
;;; emacs_client.el ends here
