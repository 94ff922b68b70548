;;; torchscan-eglot.el --- torchscan-lsp through eglot  -*- lexical-binding: t; -*-

;;; Commentary:

;; Shows what a PyTorch model costs (parameters, FLOPs, shapes) in hovers and diagnostics, from
;; the torchscan-lsp language server, in Emacs 28+ with eglot 1.9+.
;;
;;   (add-to-list 'load-path "/path/to/torchscan-lsp/editors/emacs")
;;   (require 'torchscan-eglot)
;;   (setq torchscan-python "~/venvs/ml/bin/python"   ; has torchscan-lsp and torch
;;         torchscan-allow-execution t)               ; only for code you trust
;;   (torchscan-eglot-setup)
;;   (add-hook 'python-mode-hook #'eglot-ensure)
;;
;; eglot runs one server per major mode, so this replaces any other Python server in eglot.
;;
;; The server reads the workspace's defaults from pyproject.toml ([tool.torchscan-lsp]) at the root
;; eglot gives it, and eglot's root is project.el's project.  A folder with a pyproject.toml but no
;; version control is no project to project.el, so eglot would root the server at the file's own
;; folder; `torchscan-eglot-setup' therefore makes the nearest folder above a Python file that holds
;; a pyproject.toml its project (as the Neovim plugin's root markers do).

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'project)

(defgroup torchscan nil
  "What a PyTorch model costs, from the torchscan-lsp language server."
  :group 'tools
  :prefix "torchscan-")

(defcustom torchscan-python "python3"
  "Python interpreter that has the torchscan-lsp package; it runs the server."
  :type 'string)

(defcustom torchscan-allow-execution nil
  "Non-nil lets the server run the workspace's model code.
Emacs has no workspace trust, so this is the opt-in: without it
nothing is analysed."
  :type 'boolean)

(defcustom torchscan-settings nil
  "Further server settings (section torchscan), as a plist.
For example:
  (:device \"cuda\" :timeoutSeconds 120 :inlayHints (:shapes :json-false))"
  :type 'plist)

(defvar torchscan-states (make-hash-table :test #'equal)
  "Analysis state of each document URI, from `torchscan/status': (STATE . MESSAGE).")

(defun torchscan--check-interpreter ()
  "Signal a `user-error' with the problem and fix unless the server can start."
  (let ((python (expand-file-name torchscan-python)))
    (unless (or (executable-find torchscan-python) (file-executable-p python))
      (user-error "torchscan: no Python interpreter at %s; set the variable torchscan-python" torchscan-python))
    (with-temp-buffer
      (unless (eq 0 (call-process torchscan-python nil t nil "-c" "import torchscan_lsp"))
        (if (string-match-p "No module named '?torchscan_lsp" (buffer-string))
            (user-error "torchscan: the package is not installed in %s; run: %s -m pip install torchscan-lsp"
                        torchscan-python torchscan-python)
          (user-error "torchscan: importing torchscan_lsp with %s failed: %s"
                      torchscan-python (string-trim (buffer-string))))))))

(defun torchscan-project-try-pyproject (dir)
  "The project of a Python buffer in DIR: the nearest folder with a pyproject.toml.
The folder is DIR or one above it.  Nil in other buffers, or when
there is none, leaving the search to the other
`project-find-functions'."
  (when (derived-mode-p 'python-mode 'python-ts-mode)
    (let ((root (locate-dominating-file dir "pyproject.toml")))
      (and root (cons 'torchscan (file-name-as-directory (expand-file-name root)))))))

(cl-defmethod project-root ((project (head torchscan)))
  "The folder of PROJECT's pyproject.toml."
  (cdr project))

(defun torchscan-server-contact (&optional _interactive)
  "The eglot contact for the server: its command, after checking the interpreter."
  (torchscan--check-interpreter)
  (list torchscan-python "-m" "torchscan_lsp" "serve"))

(defun torchscan-workspace-configuration (_server)
  "The answer to the server's `workspace/configuration' pulls."
  (list :torchscan
        (append (list :allowExecution (if torchscan-allow-execution t :json-false))
                torchscan-settings)))

(cl-defmethod eglot-handle-notification
  (_server (_method (eql torchscan/status)) &key uri state message &allow-other-keys)
  "Record the analysis state of URI for `torchscan-status'."
  (puthash uri (cons state message) torchscan-states)
  (force-mode-line-update t))

(defun torchscan-status ()
  "The analysis state of the current buffer (\"done\", \"running\", ...), or nil."
  (when buffer-file-name
    (car (gethash (eglot--path-to-uri buffer-file-name) torchscan-states))))

(defun torchscan-reanalyze ()
  "Ask the server to analyse the current buffer again now."
  (interactive)
  (eglot-execute-command (eglot--current-server-or-lose) "torchscan.reanalyze"
                         (vector (eglot--path-to-uri buffer-file-name))))

;;;###autoload
(defun torchscan-eglot-setup ()
  "Use torchscan-lsp as eglot's server for Python buffers."
  (add-to-list 'eglot-server-programs '((python-mode python-ts-mode) . torchscan-server-contact))
  ;; First, so that the pyproject.toml holding the workspace defaults names the root, also when no
  ;; version control (or one further up) would.
  (add-hook 'project-find-functions #'torchscan-project-try-pyproject)
  ;; The server pulls its settings; answer from the variables above, read at each pull.
  (setq-default eglot-workspace-configuration #'torchscan-workspace-configuration))

(provide 'torchscan-eglot)
;;; torchscan-eglot.el ends here
