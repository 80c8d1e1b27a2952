"""The paper hub: a web app of trending papers (by social mentions), reading lists, notes and follows, where every
paper paperzoo implements links to its code, status and reproduction verdict. An optional extra
(``pip install paperzoo[hub]``); nothing in the library imports it. See README.md beside this file."""
