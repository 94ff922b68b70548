;;; torchscan-lsp-mode.el --- torchscan-lsp through lsp-mode  -*- lexical-binding: t; -*-

;;; Commentary:

;; Registers torchscan-lsp with lsp-mode as an add-on server for Python: it runs beside your
;; usual Python server (pyright, pylsp, ...) and adds inlay hints, hovers, code lenses and
;; diagnostics about what a PyTorch model costs.
;;
;;   (add-to-list 'load-path "/path/to/torchscan-lsp/editors/emacs")
;;   (require 'torchscan-lsp-mode)
;;   (setq torchscan-python "~/venvs/ml/bin/python"
;;         torchscan-allow-execution t)               ; only for code you trust
;;   (setq lsp-inlay-hint-enable t)
;;   (add-hook 'python-mode-hook #'lsp-deferred)

;;; Code:

(require 'lsp-mode)

(defgroup torchscan nil
  "What a PyTorch model costs, from the torchscan-lsp language server."
  :group 'tools
  :prefix "torchscan-")

(defcustom torchscan-python "python3"
  "Python interpreter that has the torchscan-lsp package; it runs the server."
  :type 'string)

(defcustom torchscan-allow-execution nil
  "Non-nil lets the server run the workspace's model code (Emacs has no workspace trust)."
  :type 'boolean)

(defcustom torchscan-device "cpu"
  "Device for targets that do not name one."
  :type 'string)

(defcustom torchscan-timeout-seconds 60
  "Wall-clock limit of one analysis, in seconds."
  :type 'number)

(defcustom torchscan-analyze-on-type nil
  "Non-nil analyses unsaved buffers, debounced."
  :type 'boolean)

(lsp-register-custom-settings
 '(("torchscan.allowExecution" torchscan-allow-execution t)
   ("torchscan.device" torchscan-device)
   ("torchscan.timeoutSeconds" torchscan-timeout-seconds)
   ("torchscan.analyzeOnType" torchscan-analyze-on-type t)))

(defvar torchscan-states (make-hash-table :test #'equal)
  "Analysis state of each document URI, from `torchscan/status': (STATE . MESSAGE).")

(defun torchscan--on-status (_workspace params)
  "Record a `torchscan/status' notification's PARAMS."
  (puthash (gethash "uri" params) (cons (gethash "state" params) (gethash "message" params)) torchscan-states)
  (force-mode-line-update t))

(defun torchscan-reanalyze ()
  "Ask the server to analyse the current buffer again now."
  (interactive)
  (lsp-send-execute-command "torchscan.reanalyze" (vector (lsp--buffer-uri))))

(lsp-register-client
 (make-lsp-client
  :new-connection (lsp-stdio-connection
                   (lambda () (list torchscan-python "-m" "torchscan_lsp" "serve"))
                   (lambda () (executable-find torchscan-python)))
  :activation-fn (lsp-activate-on "python")
  :server-id 'torchscan
  :add-on? t
  :priority -2
  :notification-handlers (ht ("torchscan/status" #'torchscan--on-status))
  :initialized-fn (lambda (workspace)
                    (with-lsp-workspace workspace
                      (lsp--set-configuration (lsp-configuration-section "torchscan"))))))

(provide 'torchscan-lsp-mode)
;;; torchscan-lsp-mode.el ends here
