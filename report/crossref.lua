--[[
crossref.lua: Quarto-style cross-references for plain pandoc (the renderer freezestats falls back to when
Quarto is not installed). It understands the subset report.qmd uses:

  ![Caption.](figures/x.svg){#fig-x}   a numbered figure        @fig-x   "Figure 3"
  | pipe table |  + ": Caption. {#tbl-y}"  a numbered table     @tbl-y   "Table 2"

HTML: figures and tables are numbered here, "Figure N: " / "Table N: " is put before the caption and every
reference becomes a link. Typst: typst numbers figures itself, so references become typst's own `@label`.
A reference to an unknown label is written as "??" and reported on stderr, like Quarto does.
]]

local names = { fig = "Figure", tbl = "Table" }
local counts = { fig = 0, tbl = 0 }
local labels = {}
local typst = FORMAT:match("typst") ~= nil

local function kind_of(id)
  if id == nil then
    return nil
  end
  local prefix = id:match("^(%a+)%-")
  if prefix and names[prefix] then
    return prefix
  end
  return nil
end

local function prefix_caption(caption, text)
  local head = { pandoc.Strong({ pandoc.Str(text .. ":") }), pandoc.Space() }
  if #caption.long == 0 then
    caption.long = { pandoc.Plain(head) }
  else
    local first = caption.long[1]
    local content = first.content
    for i = #head, 1, -1 do
      table.insert(content, 1, head[i])
    end
    first.content = content
    caption.long[1] = first
  end
  return caption
end

local function number(el)
  local kind = kind_of(el.identifier)
  if kind == nil then
    return nil
  end
  counts[kind] = counts[kind] + 1
  local text = names[kind] .. " " .. counts[kind]
  labels[el.identifier] = text
  if not typst then
    el.caption = prefix_caption(el.caption, text)
  end
  return el
end

local function reference(cite)
  local id = cite.citations[1].id
  if kind_of(id) == nil then
    return nil
  end
  local text = labels[id]
  if text == nil then
    io.stderr:write("crossref.lua: unknown reference @" .. id .. "\n")
    return pandoc.Str("??")
  end
  if typst then
    return pandoc.RawInline("typst", "@" .. id)
  end
  return pandoc.Link({ pandoc.Str(text) }, "#" .. id)
end

function Pandoc(doc)
  doc = doc:walk({ Figure = number, Table = number })
  return doc:walk({ Cite = reference })
end
