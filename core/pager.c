/* pager — to be written */
