/* buf — to be written */
